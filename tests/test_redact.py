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
