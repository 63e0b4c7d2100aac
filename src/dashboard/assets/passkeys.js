// Passkeys in the dashboard: sign-in (a button, and conditional UI in the username field where the
// browser offers it) and registration. @simplewebauthn/browser (window.SimpleWebAuthnBrowser) talks to
// the authenticator; the service's options come from a JSON endpoint, the answer goes back in a form.
// Loaded as a file (the page's CSP allows no inline script).
;(() => {
  const webauthn = window.SimpleWebAuthnBrowser
  const form = document.querySelector('form[data-passkey-sign-in], form[data-passkey-register]')
  if (!form) return
  const registering = form.hasAttribute('data-passkey-register')
  const button = form.querySelector('[data-passkey-start]')
  const errorEl = form.querySelector('[data-passkey-error]')
  const csrf = form.querySelector('input[name="csrf_token"]').value
  const optionsUrl = registering ? '/dashboard/passkeys/options' : '/dashboard/login/passkey/options'

  function showError(text) {
    errorEl.textContent = text
    errorEl.hidden = false
  }

  if (!webauthn?.browserSupportsWebAuthn()) {
    button.disabled = true
    showError('This browser cannot use passkeys.')
    return
  }

  async function options() {
    const res = await fetch(optionsUrl, {
      method: 'POST',
      headers: { 'x-csrf-token': csrf, accept: 'application/json' },
      credentials: 'same-origin',
    })
    if (!res.ok || !String(res.headers.get('content-type')).includes('json')) {
      throw new Error(
        res.status === 403
          ? 'Changing passkeys needs a recent sign-in with your passkey or authenticator code: sign out and in again.'
          : 'The service could not start the passkey ceremony. Reload the page and try again.',
      )
    }
    return (await res.json()).options
  }

  /** Runs one ceremony and posts its answer with the form (the page that follows says how it went). */
  async function ceremony(useBrowserAutofill) {
    const optionsJSON = await options()
    const answer = registering
      ? await webauthn.startRegistration({ optionsJSON })
      : await webauthn.startAuthentication({ optionsJSON, useBrowserAutofill })
    form.querySelector('input[name="response"]').value = JSON.stringify(answer)
    form.submit()
  }

  button.addEventListener('click', () => {
    errorEl.hidden = true
    button.disabled = true
    ceremony(false).catch((err) => {
      button.disabled = false
      showError(
        err?.name === 'NotAllowedError'
          ? 'The passkey was not used (cancelled or timed out).'
          : err?.message || 'The passkey did not work.',
      )
    })
  })

  // Conditional UI: the browser offers saved passkeys in the username field's suggestions. A click on
  // the button starts a ceremony of its own, which aborts this one. Not again on the page that tells of
  // a refused attempt, so a refused passkey is never retried without the user.
  const refused = document.querySelector('.error[role="alert"]:not([hidden])')
  if (!registering && !refused && document.querySelector('input[autocomplete~="webauthn"]')) {
    webauthn
      .browserSupportsWebAuthnAutofill()
      .then((yes) => (yes ? ceremony(true) : undefined))
      .catch(() => {})
  }
})()
