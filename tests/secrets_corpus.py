"""A corpus of planted secrets and of ordinary text that looks a little like them.

`KINDS`: one entry per kind a secret scanner knows, as (kind, text to plant, the secret
values that must never come out). The values are fake but well-formed (the shapes
gitleaks' and detect-secrets' rules describe), built here so that no scanner flags this
file. `ORDINARY`: strings that must come out unchanged (git SHAs, UUIDs, base64 of
normal content, paths, prose about passwords and tokens). Shared by tests/redact/test_redact.py
and tests/reliability/test_secrets.py.
"""

from __future__ import annotations

import base64
import hashlib


def _hex(seed: str, n: int) -> str:
    out = ""
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}{i}".encode()).hexdigest()
        i += 1
    return out[:n]


def _alnum(seed: str, n: int) -> str:
    raw = base64.b64encode(hashlib.sha512(seed.encode()).digest() * 4).decode()
    s = "".join(c for c in raw if c.isalnum())
    return s[:n]


def _b64(seed: str, nbytes: int) -> str:
    return base64.b64encode((hashlib.sha512(seed.encode()).digest() * 4)[:nbytes]).decode()


A = _alnum
AWS_ID = "AKIA" + _alnum("aws", 40).upper().replace("0", "7")[:16]
AWS_SECRET = _b64("aws-secret", 30)[:40]
AZURE_KEY = _b64("azure", 64)
PEM_BODY = _b64("pem", 120)
JWT = ("eyJhbGciOiJIUzI1NiJ9."
       + base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"memoryd"}').decode().rstrip("=")
       + "." + A("jwt", 43))

# (kind, text planted, secret values that must not survive)
KINDS: list[tuple[str, str, list[str]]] = [
    ("aws-access-key-id", f"aws_access_key_id = {AWS_ID}", [AWS_ID]),
    ("aws-secret-access-key", f"aws_secret_access_key = {AWS_SECRET}", [AWS_SECRET]),
    ("gcp-api-key", "key AIza" + A("gcp", 35), ["AIza" + A("gcp", 35)]),
    ("gcp-oauth-token", "ya29." + A("ya29", 60), ["ya29." + A("ya29", 60)]),
    ("gcp-service-account", '{"type": "service_account", "private_key_id": "'
     + _hex("sa", 40) + '"}', [_hex("sa", 40)]),
    ("azure-storage", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
     + AZURE_KEY + ";EndpointSuffix=core.windows.net", [AZURE_KEY]),
    ("azure-sas", "https://acme.blob.core.windows.net/c?sv=2021-08-06&sig="
     + A("sas", 43) + "%3D", [A("sas", 43)]),
    ("postgres-url", "postgres://app:Pg" + A("pg", 14) + "@db.internal:5432/app",
     ["Pg" + A("pg", 14)]),
    ("mongodb-url", "mongodb+srv://root:Mo" + A("mongo", 14) + "@cluster0.mongodb.net/db",
     ["Mo" + A("mongo", 14)]),
    ("redis-url", "redis://:Re" + A("redis", 14) + "@cache:6379/0", ["Re" + A("redis", 14)]),
    ("amqp-url", "amqp://guest:Am" + A("amqp", 14) + "@rabbit:5672/", ["Am" + A("amqp", 14)]),
    ("https-basic-auth", "https://deploy:Ht" + A("basic", 14) + "@git.example.com/r.git",
     ["Ht" + A("basic", 14)]),
    ("stripe-secret", "sk_live_" + A("stripe", 24), ["sk_live_" + A("stripe", 24)]),
    ("stripe-restricted", "rk_live_" + A("rk", 24), ["rk_live_" + A("rk", 24)]),
    ("twilio-api-key", "SK" + _hex("twilio", 32), ["SK" + _hex("twilio", 32)]),
    ("twilio-account-sid", "AC" + _hex("twsid", 32), ["AC" + _hex("twsid", 32)]),
    ("sendgrid", "SG." + A("sg1", 22) + "." + A("sg2", 43), ["SG." + A("sg1", 22)]),
    ("slack-token", "xoxb-" + _hex("sl1", 12)[:12].replace("a", "1") + "-" + A("slack", 24),
     [A("slack", 24)]),
    ("slack-webhook", "https://hooks.slack.com/services/T" + A("t", 8).upper() + "/B"
     + A("b", 8).upper() + "/" + A("wh", 24), [A("wh", 24)]),
    ("discord-webhook", "https://discord.com/api/webhooks/123456789012345678/"
     + A("dw", 68), [A("dw", 68)]),
    ("telegram-bot", "bot token 7012345678:AA" + A("tg", 33), ["AA" + A("tg", 33)]),
    ("github-pat", "ghp_" + A("ghp", 36), ["ghp_" + A("ghp", 36)]),
    ("github-oauth", "gho_" + A("gho", 36), ["gho_" + A("gho", 36)]),
    ("github-app", "ghs_" + A("ghs", 36), ["ghs_" + A("ghs", 36)]),
    ("github-fine-grained", "github_pat_" + A("fg", 22) + "_" + A("fg2", 59),
     ["github_pat_" + A("fg", 22)]),
    ("gitlab-pat", "glpat-" + A("gl", 20), ["glpat-" + A("gl", 20)]),
    ("npm-token", "//registry.npmjs.org/:_authToken=npm_" + A("npm", 36),
     ["npm_" + A("npm", 36)]),
    ("pypi-token", "pypi-AgEIcHlwaS5vcmc" + A("pypi", 60), [A("pypi", 60)]),
    ("openai-key", "sk-" + A("oai", 48), ["sk-" + A("oai", 48)]),
    ("openai-project-key", "sk-proj-" + A("proj", 60), [A("proj", 60)]),
    ("anthropic-key", "sk-ant-api03-" + A("ant", 80) + "AA", [A("ant", 80)]),
    ("google-ai-key", "GEMINI key AIza" + A("gem", 35), ["AIza" + A("gem", 35)]),
    ("huggingface", "hf_" + A("hf", 34), ["hf_" + A("hf", 34)]),
    ("private-key", "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY
     + "\n-----END RSA PRIVATE KEY-----", [PEM_BODY[:40], PEM_BODY[-40:]]),
    ("openssh-private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _b64("ssh", 90)
     + "\n-----END OPENSSH PRIVATE KEY-----", [_b64("ssh", 90)[:40]]),
    ("jwt", "cookie jwt " + JWT, [JWT]),
    ("bearer-header", "Authorization: Bearer " + A("bearer", 40), [A("bearer", 40)]),
    ("env-key", "STRIPE_SIGNING_KEY=" + A("envkey", 30), [A("envkey", 30)]),
    ("env-secret", "APP_SECRET=" + A("envsec", 20), [A("envsec", 20)]),
    ("env-token", 'export CI_DEPLOY_TOKEN="' + A("envtok", 24) + '"', [A("envtok", 24)]),
    ("env-password", "DB_PASSWORD=correct-horse-battery", ["correct-horse-battery"]),
    ("yaml-password", "database:\n  password: Yp" + A("yaml", 10), ["Yp" + A("yaml", 10)]),
    ("json-api-key", '{"api_key": "' + _hex("jsonkey", 40) + '"}', [_hex("jsonkey", 40)]),
    ("key-high-entropy", "signing key = " + _hex("hk", 8) + ", cache_key = '"
     + _b64("hk2", 30) + "'", [_b64("hk2", 30)]),
    ("cli-password-flag", "mysql -h db --password Cl" + A("cli", 12) + " app",
     ["Cl" + A("cli", 12)]),
]

ORDINARY: list[str] = [
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)",
    "git checkout 3f2a9c1 && git log --oneline a1b2c3d4e5f6",
    "request id 123e4567-e89b-12d3-a456-426614174000 took 40 ms",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "encoded " + base64.b64encode(b"the quick brown fox jumps over the lazy dog").decode(),
    "/home/alice/projects/memoryd/memoryd/ingest/adapters/claude_code.py:120",
    "src/components/PasswordResetForm.tsx and tests/test_token_budget.py",
    "we discussed the password reset flow and 令牌 tokens: 12",
    "max_tokens=600, token_count: 42, tokens: 1200",
    "token = get_token(request)",
    "password: str = Field(..., min_length=8)",
    "the api key is read from $OPENAI_API_KEY at start",
    "https://github.com/anthropics/claude-code/blob/main/README.md#install",
    "http://localhost:8080/v1/search?q=quokka",
    "Basic functionality works; bearer of bad news",
    "密码重置流程已经讨论过了，令牌预算是每天十万。",
    "sort by key: name, then by key: date",
    "monkey = 'banana'",
]
