"""The token shapes a secret scanner knows, as (name, regex, triggers) rows.

Modelled on the kinds gitleaks' rule set and detect-secrets' plugins cover (own
patterns, not theirs): cloud providers, connection strings and URL credentials,
payment, messaging, VCS, package registries, LLM providers, auth headers, JWTs.

Each row is guarded by the literals every match of it holds (`triggers`, as is) or by
an RE2 gate (`GATES`): the redactor's one pre-scan (`memoryd.redact.prescan`) finds them
all at once, and a text that holds none of a row's skips the row. Patterns start with their literal where they can (the regex engine then scans for
it); the word boundary before a token is checked in `whole` instead of with a leading
`\\b`, which would make the engine try every position.
"""

from __future__ import annotations

import re

from memoryd.redact.prescan import any_case

REDACTED = "[REDACTED]"


def _boundary_ok(m: re.Match[str]) -> bool:
    i = m.start()
    if i == 0:
        return True
    c = m.string[i - 1]
    return not (c.isalnum() or c == "_")


def whole(m: re.Match[str]) -> str:
    """The whole match, when it starts a word."""
    return REDACTED if _boundary_ok(m) else m.group()


def value(m: re.Match[str]) -> str:
    """Only the `value` group: the name or scheme around it stays readable."""
    a, b = m.span("value")
    off = m.start()
    s = m.group()
    return s[: a - off] + REDACTED + s[b - off :]


def basic_auth(m: re.Match[str]) -> str:
    v = m.group("value")
    if not (v.endswith("=") or any(c.isdigit() for c in v)):
        return m.group()  # "Basic functionality", not a credential
    return value(m)


# (name, pattern, triggers, replacement). Every match of a pattern contains one of its
# triggers, as is (tests/redact/test_prescan.py proves it from the parsed pattern); a row
# with no literal every match must hold has its RE2 gate in `GATES` instead.
TOKENS: list[tuple[str, str, tuple[str, ...], object]] = [
    # -- cloud providers --
    ("aws-access-key-id", r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16,}",
     ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"), whole),
    ("gcp-api-key", r"AIza[0-9A-Za-z_-]{35,}", ("AIza",), whole),
    ("gcp-oauth-token", r"ya29\.[0-9A-Za-z_-]{20,}", ("ya29.",), whole),
    ("google-client-secret", r"GOCSPX-[0-9A-Za-z_-]{20,}", ("GOCSPX-",), whole),
    ("azure-ad-client-secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,}", ("Q~",),
     whole),
    ("azure-sas-signature", r"[?&;]sig=(?P<value>[A-Za-z0-9%+/=]{16,})", ("sig=",), value),
    ("alibaba-access-key", r"LTAI[A-Za-z0-9]{20,}", ("LTAI",), whole),
    ("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64,}", ("dop_v1_", "doo_v1_", "dor_v1_"), whole),
    ("databricks-token", r"dapi[a-f0-9]{32,}", ("dapi",), whole),
    ("vault-token", r"hv[sb]\.[\w-]{24,}", ("hvs.", "hvb."), whole),
    ("doppler-token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", ("dp.",),
     whole),
    ("heroku-key", r"HRKU-[\w-]{30,}", ("HRKU-",), whole),
    ("fly-token", r"fo1_[\w-]{40,}", ("fo1_",), whole),
    ("supabase-token", r"sbp_[a-f0-9]{40,}", ("sbp_",), whole),
    ("netlify-token", r"nfp_[A-Za-z0-9]{36,}", ("nfp_",), whole),
    ("planetscale-token", r"pscale_(?:pw|tkn|oauth)_[\w.-]{32,}", ("pscale_",), whole),
    ("age-secret-key", r"AGE-SECRET-KEY-1[0-9A-Z]{58,}", ("AGE-SECRET-KEY-1",), whole),
    # -- URL credentials and connection strings (scheme://user:PASSWORD@host) --
    ("url-credentials",
     r"://(?P<user>[^\s:/?#@\"'\\<>]*):(?P<value>[^\s/?#@\"'\\<>]+)@(?=[\w\[])",
     ("://",), value),
    ("curl-user", r"(?:\s-u|--user)[ =](?P<user>[^\s:\"'\\]+):(?P<value>[^\s\"'\\]+)",
     ("-u",), value),  # "-u=" as well; "--user" holds "-u"
    # -- payment --
    ("stripe-key", r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}", ("sk_live_", "sk_test_",
     "rk_live_", "rk_test_"), whole),
    ("stripe-webhook-secret", r"whsec_[A-Za-z0-9]{24,}", ("whsec_",), whole),
    ("square-token", r"(?:sq0(?:atp|csp)-[\w-]{22,}|EAAA[\w-]{60,})",
     ("sq0atp-", "sq0csp-", "EAAA"),
     whole),
    # -- messaging --
    ("twilio-key", r"(?:SK|AC)[0-9a-fA-F]{32,}", ("SK", "AC"), whole),
    ("sendgrid-key", r"SG\.[\w-]{16,}\.[\w-]{16,}", ("SG.",), whole),
    ("slack-token", r"xox[abposre]-[A-Za-z0-9-]{10,}", ("xox",), whole),
    ("slack-app-token", r"xapp-\d-[A-Za-z0-9-]{10,}", ("xapp-",), whole),
    ("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}",
     ("hooks.slack.com/",), whole),
    ("discord-webhook", r"discord(?:app)?\.com/api/webhooks/\d+/[\w-]{20,}", ("/api/webhooks/",),
     whole),
    ("discord-bot-token", r"[MNO][A-Za-z\d_-]{23,}\.[\w-]{6,}\.[\w-]{27,}",
     (), whole),  # GATES
    ("telegram-bot-token", r"\d{6,}:AA[\w-]{30,}", (":AA",), whole),
    ("mailgun-key", r"key-[0-9a-f]{32,}", ("key-",), whole),
    ("mailchimp-key", r"[0-9a-f]{32,}-us\d+", ("-us",), whole),
    # -- version control, CI --
    ("github-token", r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{22,})",
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), whole),
    ("gitlab-token", r"(?:gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent)-[\w-]{20,}"
                     r"|GR1348941[\w-]{20,})",
     ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "gloas-", "glsoat-",
      "glagent-", "GR1348941"), whole),
    ("atlassian-token", r"ATATT3[A-Za-z0-9_=-]{50,}", ("ATATT3",), whole),
    ("linear-key", r"lin_api_[A-Za-z0-9]{32,}", ("lin_api_",), whole),
    ("notion-token", r"(?:secret_|ntn_)[A-Za-z0-9]{43,}", ("secret_", "ntn_"), whole),
    ("sentry-token", r"sntr[ysu]_[A-Za-z0-9+/=_-]{40,}", ("sntr",), whole),
    ("grafana-token", r"gl(?:c|sa)_[A-Za-z0-9+/=_-]{32,}", ("glc_", "glsa_"), whole),
    ("postman-key", r"PMAK-[a-f0-9]{24,}-[a-f0-9]{34,}", ("PMAK-",), whole),
    ("newrelic-key", r"NRAK-[A-Z0-9]{27,}", ("NRAK-",), whole),
    ("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32,}", ("shp",), whole),
    # -- package registries --
    ("npm-token", r"npm_[A-Za-z0-9]{36,}", ("npm_",), whole),
    ("pypi-token", r"pypi-Ag[\w-]{40,}", ("pypi-Ag",), whole),
    ("docker-token", r"dckr_pat_[\w-]{24,}", ("dckr_pat_",), whole),
    ("rubygems-key", r"rubygems_[a-f0-9]{48,}", ("rubygems_",), whole),
    # -- LLM providers (sk- covers OpenAI sk-proj-, Anthropic sk-ant-, OpenRouter sk-or-,
    #    DeepSeek and the other OpenAI-style keys) --
    ("llm-key", r"sk-[A-Za-z0-9_-]{20,}", ("sk-",), whole),
    ("huggingface-token", r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", ("hf_", "api_org_"), whole),
    ("groq-key", r"gsk_[A-Za-z0-9]{40,}", ("gsk_",), whole),
    ("replicate-token", r"r8_[A-Za-z0-9]{30,}", ("r8_",), whole),
    ("xai-key", r"xai-[A-Za-z0-9]{40,}", ("xai-",), whole),
    ("perplexity-key", r"pplx-[A-Za-z0-9]{40,}", ("pplx-",), whole),
    ("langsmith-key", r"lsv2_(?:pt|sk)_[a-f0-9]{32,}_[a-f0-9]{10,}", ("lsv2_",), whole),
    # -- auth headers, JWTs --
    ("jwt", r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}", ("eyJ",), whole),
    ("bearer", r"[Bb]earer\s+(?P<value>[A-Za-z0-9._~+/=-]{16,})", ("Bearer", "bearer"), value),
    ("basic-auth", r"Basic\s+(?P<value>[A-Za-z0-9+/]{12,}={0,2})", ("Basic",), basic_auth),
    ("auth-header-token", r"(?i:authorization)[\"']?\s*:\s*[\"']?token\s+(?P<value>[\w.-]{16,})",
     ("token",), value),
]

# RE2 gates (searched in the text's UTF-8), for rows whose literals are common words or
# absent: a row with a gate runs only where it matches, instead of where its triggers
# occur. Each matches wherever its row's pattern does (tests/redact/test_prescan.py
# draws matches of the patterns and checks): `\w` and `\d` are widened to every
# non-ASCII character (Python's match a subset of them), a case-insensitive literal
# takes every character Python's IGNORECASE folds onto its letters.
_WIDE = r"A-Za-z0-9_\x{80}-\x{10FFFF}"
GATES: dict[str, str] = {
    "discord-bot-token": rf"\.[{_WIDE}-]{{6,}}\.",
    "twilio-key": r"(?:SK|AC)[0-9a-fA-F]{4}",
    "curl-user": r"(?:-u|--user)[ =]",
    "mailchimp-key": r"[0-9a-f]{4}-us",
    "auth-header-token": any_case("authorization"),
}
# a match holds no blank: a row runs only on texts with a run of this many non-blanks
MIN_RUN: dict[str, int] = {"discord-bot-token": 59}
