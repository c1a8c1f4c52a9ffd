"""Issue 36, finding 6: a key the server echoes URL-encoded, base64-encoded or JSON-escaped survived into records and
the quality JSON. The one scrubber (tui.core.redact) removes each form; an error line also loses every URL's user
info and query values; a text cut short loses a secret's beginning left at its end.

The forms here are made the way a server makes them (urllib, base64, json), never with the scrubber's own code;
the base64 check decodes what is left and looks for the secret at every alignment.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from urllib.parse import quote, quote_plus

import pytest

from tui.core.redact import REDACTED, Scrubber, scrub_urls

SECRETS = ['Kz9/Q+w=r"t\\y&p%4!abc', "sk-live-0123456789abcdefXYZ", "p@ss/w0rd+Z=q", "tok with spaces/+="]


def server_forms(secret: str, name: str = "authorization") -> dict[str, str]:
    """How a careless server repeats ``secret``."""
    b = secret.encode()
    out = {
        "raw": secret,
        "quote": quote(secret, safe=""),
        "quote_slash": quote(secret),
        "quote_plus": quote_plus(secret),
        "quote_lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")),
        "b64": base64.b64encode(b).decode(),
        "b64_nopad": base64.b64encode(b).decode().rstrip("="),
        "b64_urlsafe": base64.urlsafe_b64encode(b).decode(),
        "json": json.dumps(secret)[1:-1],
        "json_unicode": json.dumps(secret, ensure_ascii=False)[1:-1],
        "json_slash": json.dumps(secret)[1:-1].replace("/", "\\/"),
        "json_twice": json.dumps(json.dumps(secret)[1:-1])[1:-1],
    }
    for k, prefix in enumerate(("", "x", "xy", f"{name}: Bearer ", "Basic ")):
        out[f"b64_line{k}"] = base64.b64encode(prefix.encode() + b + b" trailing").decode()
    return out


def _b64_runs_hold(text: str, secret: str) -> bool:
    """Whether any base64 run left in ``text`` decodes (at any alignment) to bytes holding ``secret``."""
    want = secret.encode()
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}={0,2}", text):
        run = run.replace("-", "+").replace("_", "/").rstrip("=")
        for shift in range(4):
            chunk = run[shift:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            try:
                if want in base64.b64decode(chunk + "=" * (-len(chunk) % 4)):
                    return True
            except ValueError:
                continue
    return False


@pytest.mark.parametrize("secret", SECRETS)
def test_every_form_a_server_echoes_is_removed(secret):
    scrub = Scrubber([secret])
    for form_name, form in server_forms(secret).items():
        text = f"error: denied {form} (request 7)"
        out = scrub.text(text)
        assert form not in out, form_name
        assert secret not in out and REDACTED in out, form_name
        assert not _b64_runs_hold(out, secret), form_name
        assert out.endswith("(request 7)")  # the text around it is kept


@pytest.mark.parametrize("seed", range(30))
def test_random_keys_in_random_forms_never_survive(seed):
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "-_./+=:@%&\"\\!~*"
    secret = "".join(rng.choice(alphabet) for _ in range(rng.randint(12, 48)))
    scrub = Scrubber([f"Bearer {secret}"])  # registered as the header value, as the load generator does
    for form_name, form in server_forms(secret).items():
        out = scrub(f"HTTP 400: {rng.choice(['', 'key='])}{form}", limit=10_000)
        assert form not in out and secret not in out, form_name
        assert not _b64_runs_hold(out, secret), form_name


def test_ordinary_text_is_kept():
    scrub = Scrubber(SECRETS)
    text = "The quick brown fox jumps over the lazy dog; HTTP 503: Service Unavailable (retry after 5 s)."
    assert scrub.text(text) == text
    assert scrub(text) == text


def test_an_error_line_loses_url_user_info_and_query_values_an_answer_keeps_them():
    line = "GET http://alice:s3cret@host:8080/v1/models?api-key=abcdef&x=1 failed; see https://h/docs?tokenvalue"
    out = Scrubber()(line, limit=10_000)
    assert "alice" not in out and "s3cret" not in out and "abcdef" not in out and "tokenvalue" not in out
    assert "http://<redacted>@host:8080/v1/models?api-key=<redacted>&x=<redacted>" in out
    assert "https://h/docs?<redacted>" in out
    assert Scrubber().text(line) == line  # an answer's text keeps its URLs (graded as the model wrote them)
    assert scrub_urls("no url here: a?b=c") == "no url here: a?b=c"


def test_a_secret_cut_at_the_end_of_a_truncated_body_is_removed():
    secret = "Zq9-live-0123456789abcdefXYZ"  # not key-like: only the registered secret can match it
    scrub = Scrubber([secret])
    for n in (6, 10, len(secret) - 1):
        body = "x" * 50 + " key " + secret[:n]
        assert secret[:n] not in scrub(body, cut=True)
        assert secret[:n] in scrub(body)  # without cut=True the end is not taken as a cut
    enc = quote(secret + "/", safe="")[:-3]  # a cut inside an encoded form
    assert scrub("denied " + enc[:20], cut=True).endswith(REDACTED)
    assert scrub("ends with Zq9-l", cut=True).endswith("Zq9-l")  # shorter than MIN_CUT_LEN: kept
