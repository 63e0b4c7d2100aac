import { createHash } from 'node:crypto'

// Sends the new password to this same address (which holds the token) as JSON and shows the answer.
const SCRIPT = `
const form = document.getElementById('reset');
const out = document.getElementById('out');
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const password = form.elements.password.value;
  if (password !== form.elements.again.value) { out.textContent = 'The two passwords differ.'; return; }
  let res;
  try {
    res = await fetch(location.pathname, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ new_password: password }),
    });
  } catch {
    out.textContent = 'The service could not be reached; try again.';
    return;
  }
  if (res.ok) { form.remove(); out.textContent = 'Your password was changed. Sign in with it now.'; return; }
  const body = await res.json().catch(() => ({}));
  out.textContent = res.status === 422 ? 'The password must have 8 to 128 characters.'
    : typeof body.detail === 'string' ? body.detail : 'Something went wrong; try again.';
});
`

/**
 * The page an e-mailed reset link opens. It holds no token (the script reads it from the address
 * bar) and says nothing about whether the link works: the POST answers that.
 */
export const RESET_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Choose a new password · wristband</title>
</head>
<body>
<h1>Choose a new password</h1>
<form id="reset">
<p><label>New password <input name="password" type="password" autocomplete="new-password" minlength="8" maxlength="128" required></label></p>
<p><label>Once more <input name="again" type="password" autocomplete="new-password" minlength="8" maxlength="128" required></label></p>
<p><button type="submit">Set password</button></p>
</form>
<p id="out" role="status"></p>
<script>${SCRIPT}</script>
</body>
</html>
`

/** Only this page's own script runs, it talks only to this service, and nothing may frame it. */
export const RESET_PAGE_CSP = [
  "default-src 'none'",
  `script-src 'sha256-${createHash('sha256').update(SCRIPT).digest('base64')}'`,
  "connect-src 'self'",
  "form-action 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ')
