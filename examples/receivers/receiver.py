# A webhook receiver in Python, standard library only (docs/partner-api.md): verifies wristband's
# Standard Webhooks signature, refuses stale times and replays, prints each notification as a JSON line.
# WEBHOOK_SECRET=whsec_... PORT=9000 python3 receiver.py
import base64, hashlib, hmac, json, os, re, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

KEY = base64.b64decode(os.environ["WEBHOOK_SECRET"].removeprefix("whsec_"))
SEEN = {}  # "id timestamp" -> when it may be forgotten (use a shared store with several receivers)


def b64(text):
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return b""


def refusal(headers, body):
    msg_id = headers.get("webhook-id", "")
    ts = headers.get("webhook-timestamp", "")
    if not re.fullmatch(r"\d{1,12}", ts):
        return "bad timestamp"
    if abs(time.time() - int(ts)) > 300:
        return "stale"
    expected = hmac.new(KEY, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    given = [s[3:] for s in headers.get("webhook-signature", "").split(" ") if s.startswith("v1,")]
    if not any(hmac.compare_digest(b64(g), expected) for g in given):
        return "bad signature"
    now = time.time()
    for k in [k for k, until in SEEN.items() if until < now]:
        del SEEN[k]
    if f"{msg_id} {ts}" in SEEN:
        return "replay"
    SEEN[f"{msg_id} {ts}"] = now + 600
    return None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        refused = refusal(self.headers, body)
        if refused:
            self.send_response(400)
            self.end_headers()
            self.wfile.write(refused.encode())
            return
        # Handle it (deduplicate by webhook-id: a resend carries the same one), then acknowledge.
        print(json.dumps({"id": self.headers["webhook-id"], **json.loads(body)}), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9000"))), Receiver)
print("listening", file=sys.stderr, flush=True)
server.serve_forever()
