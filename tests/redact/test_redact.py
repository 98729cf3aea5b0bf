from memoryd.ingest.redact import Redactor

R = Redactor(extra_patterns=[r"ACME-\d{6}"])


def test_api_keys_and_tokens_are_redacted():
    for secret in ["sk-abcdefghijklmnopqrstuvwxyz0123", "sk-ant-api03-abcdefghijklmnopqrstuv",
                   "ghp_" + "a" * 36, "AKIAABCDEFGHIJKLMNOP", "xoxb-1234567890-abcdefghij",
                   "AIza" + "b" * 35, "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.c2lnbmF0dXJlMTIz"]:
        out = R.clean(f"use {secret} now")
        assert secret not in out and "[REDACTED]" in out, secret


def test_password_assignments_keep_the_key():
    assert R.clean("password=hunter2!x") == "password=[REDACTED]"
    assert R.clean('export OPENAI_API_KEY="abc123def456"') == 'export OPENAI_API_KEY="[REDACTED]"'
    assert R.clean("Authorization: Bearer abcdefghijklmnopqrstu") == \
        "Authorization: Bearer [REDACTED]"


def test_private_key_block_and_private_tags():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----"
    assert R.clean(f"key:\n{pem}\ndone") == "key:\n[REDACTED private key]\ndone"
    assert R.clean("a <private>my address</private> b") == "a [private] b"
    assert R.clean("a <private>unterminated") == "a [private]"


def test_base64_blobs_become_placeholders_with_size():
    out = R.clean("see data:image/png;base64," + "A" * 4096 + " end")
    assert out == "see [data image/png, 3 KB] end"
    assert R.clean("x " + "Q" * 8000) == "x [base64 data, 6 KB]"


def test_user_patterns_and_plain_text_untouched():
    assert R.clean("ticket ACME-123456") == "ticket [REDACTED]"
    plain = "we discussed the password reset flow and 令牌 tokens: 12"
    assert R.clean(plain) == plain


# -- the kinds a secret scanner knows, in every placement ------------------------------

import json  # noqa: E402

import pytest  # noqa: E402

from memoryd.redact import Redactor as PackageRedactor  # noqa: E402
from tests.secrets_corpus import KINDS, ORDINARY  # noqa: E402


def placements(text: str) -> dict[str, str]:
    """The shapes one planted text takes in what the adapters hand the redactor."""
    return {
        "user text": f"here is my config, please check it:\n{text}\nthanks",
        "tool output": f"$ cat .env\nLOG_LEVEL=info\n{text}\nexit 0",
        "tool args": json.dumps({"command": f"echo '{text}' >> config"}),
        # a JSON document inside a JSON string: quotes escaped once more
        "escaped tool args": json.dumps({"content": json.dumps({"note": text, "v": 1})}),
    }


def test_the_ingest_import_path_is_the_package():
    assert Redactor is PackageRedactor


def test_at_least_thirty_kinds():
    assert len({k for k, _, _ in KINDS}) >= 30


@pytest.mark.parametrize("kind,text,secrets", KINDS, ids=[k for k, _, _ in KINDS])
def test_every_kind_in_every_placement(kind, text, secrets):
    r = PackageRedactor()
    for where, planted in placements(text).items():
        assert all(s in planted for s in secrets), (kind, where)  # planted for real
        out = r.clean(planted)
        leaked = [s for s in secrets if s in out]
        assert not leaked, f"{kind} in {where}: {out!r}"
        assert "REDACTED" in out, f"{kind} in {where}: nothing redacted"


def test_the_issue_8_reproductions():
    r = PackageRedactor()
    hexkey = "0123456789abcdef" * 2 + "9f8e7d6c"
    cases = {
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY":
            "aws_secret_access_key = [REDACTED]",
        "AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFi+/==;EndpointSuffix=x":
            "AccountName=a;AccountKey=[REDACTED];EndpointSuffix=x",
        "psql postgres://user:pass1234@host/db": "psql postgres://user:[REDACTED]@host/db",
        '{\\"api_key\\": \\"' + hexkey + '\\"}': '{\\"api_key\\": \\"[REDACTED]\\"}',
        "SG.abcdefghijklmnopqrstuv.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq": "[REDACTED]",
    }
    for text, want in cases.items():
        assert r.clean(text) == want


def test_names_keep_their_values_readable_when_not_secret():
    r = PackageRedactor()
    assert r.clean("SORT_KEY=name") == "SORT_KEY=[REDACTED]"  # .env style: any value
    assert r.clean("password = args.password") == "password = args.password"
    assert r.clean("token: Optional[str] = None") == "token: Optional[str] = None"
    assert r.clean('"password": ""') == '"password": ""'
    assert r.clean("redis://:pw1234@cache:6379") == "redis://:[REDACTED]@cache:6379"
    assert r.clean("see https://user@example.com/x") == "see https://user@example.com/x"


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_not_redacted(text):
    r = PackageRedactor()
    for where, planted in placements(text).items():
        assert r.clean(planted) == planted, where


def test_redaction_is_idempotent():
    r = PackageRedactor()
    for _, text, _ in KINDS:
        once = r.clean(text)
        assert r.clean(once) == once


def test_a_name_as_a_value_does_not_hide_the_next_assignment():
    # found by the proof suite: "<kind>: aws_secret_access_key = …" consumed the name as
    # the value of "key:", and the secret after it was kept
    r = PackageRedactor()
    assert r.clean("aws-secret-access-key: aws_secret_access_key = wJalrXUtnFEMI/K7MDENG") \
        == "aws-secret-access-key: aws_secret_access_key = [REDACTED]"



async def test_a_title_with_a_secret_is_stored_redacted_in_the_session_and_the_cursor(
        memoryd_home, sock, tmp_path):
    """The file cursor's saved state carried the adapter's raw title into the DB."""
    from tests.helpers import AsyncClient, running_daemon, wait_for, write_jsonl

    secret = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    src = tmp_path / "src"
    write_jsonl(src / "chat.jsonl", [
        {"title": f"deploy with token {secret}"},
        {"role": "user", "content": "hello there, how is the deploy going?"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        await wait_for(lambda: c.status(), timeout=10)
        await wait_for(lambda: _caught_up(c))
        sessions = (await c.sessions())["sessions"]
        assert sessions and secret not in sessions[0]["title"]
        db = d.paths.db
    for f in db.parent.glob(db.name + "*"):
        assert secret.encode() not in f.read_bytes(), f.name


async def _caught_up(c) -> bool:
    s = await c.status()
    return s["caught_up"] and s["units"] >= 1


def test_the_assignment_pre_filter_never_hides_an_assignment():
    """`assign._MAYBE` (the reversed scan that lets most texts skip ASSIGN) finds a name
    before a separator wherever ASSIGN matches: every name, quote, blank and separator
    shape, alone and inside text, escaped as in JSON inside JSON."""
    from memoryd.redact import assign

    names = [*assign._KW_NAMES, "DB_PASSWORD", "api_key", "x-auth", "AccountKey", "my.secret"]
    quotes = ["", '"', "'", '\\"', '\\\\"', "\\'"]
    seps = [":", "=", ":=", "=>"]
    blanks = ["", " ", "\t", "  "]
    checked = 0
    for name in names:
        for q1 in quotes:
            for sep in seps:
                for blank in blanks:
                    for around in ("{}", "note: x {} y", 'cfg = {{"a": 1, {}}}'):
                        text = around.format(f"{name}{q1}{blank}{sep}{blank}{q1}s3cr3tVALUE9")
                        low = text.lower()
                        if assign.ASSIGN.search(low) is None:
                            continue
                        checked += 1
                        assert assign._MAYBE.search(low[::-1]) is not None, text
    assert checked > 2000
    # and a text with separators but no name before them skips ASSIGN
    plain = "Note: the build at 10:42 took 3 = three minutes; see https://example.com/a?b=c"
    assert assign._MAYBE.search(plain.lower()[::-1]) is None


# -- issue 28 item 4: a key longer than its vendor's shape -----------------------------

_H = "0123456789abcdef" * 8
_U = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" * 3
_L = "aB3dE5gH7jK9mN1pQ2sT4vW6xY8z" * 4
# every rule whose key has a fixed length or an upper bound, given a longer key
_LONGER = {
    "twilio-key": "SK" + _H[:33],
    "twilio-sid": "AC" + _H[:40],
    "aws-access-key-id": "AKIA" + _U[:17],
    "gcp-api-key": "AIza" + _L[:36],
    "alibaba-access-key": "LTAI" + _L[:21],
    "digitalocean-token": "dop_v1_" + _H[:65],
    "databricks-token": "dapi" + _H[:33],
    "supabase-token": "sbp_" + _H[:41],
    "netlify-token": "nfp_" + _L[:37],
    "age-secret-key": "AGE-SECRET-KEY-1" + _U[:59],
    "azure-ad-client-secret": "abc1Q~" + _L[:35],
    "sendgrid-key": "SG." + _L[:33] + "." + _L[:65],
    "telegram-bot-token": "1234567890123:AA" + _L[:41],
    "discord-bot-token": "M" + _L[:28] + "." + _L[:7] + "." + _L[:41],
    "mailgun-key": "key-" + _H[:33],
    "mailchimp-key": _H[:33] + "-us123",
    "postman-key": "PMAK-" + _H[:25] + "-" + _H[:35],
    "newrelic-key": "NRAK-" + _U[:28],
    "shopify-token": "shpat_" + _H[:33],
    "npm-token": "npm_" + _L[:37],
    "rubygems-key": "rubygems_" + _H[:49],
    "langsmith-key": "lsv2_pt_" + _H[:33] + "_" + _H[:11],
}


@pytest.mark.parametrize("rule", sorted(_LONGER))
def test_issue_28_a_key_longer_than_its_vendor_shape_is_redacted_whole(rule):
    key = _LONGER[rule]
    for text in (f"key {key} now", f"key {key}"):
        out = PackageRedactor().clean(text)
        assert out == text.replace(key, "[REDACTED]"), (rule, out)
