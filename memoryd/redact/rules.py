"""The token shapes a secret scanner knows, as (name, regex, triggers) rows.

Modelled on the kinds gitleaks' rule set and detect-secrets' plugins cover (own
patterns, not theirs): cloud providers, connection strings and URL credentials,
payment, messaging, VCS, package registries, LLM providers, auth headers, JWTs.

Each row is guarded by the literals it cannot match without (`triggers`): a text that
holds none of them skips the row, so the common case costs a few substring searches.
Case-sensitive triggers are searched in the text as is, the others in its lower-cased
copy. Patterns start with their literal where they can (the regex engine then scans for
it); the word boundary before a token is checked in `whole` instead of with a leading
`\\b`, which would make the engine try every position.
"""

from __future__ import annotations

import re

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


# How a row's triggers are looked for:
P = "prefix"  # the token starts with one of them: looked up among the text's long words
T = "text"  # anywhere in the text, case-sensitive
I = "itext"  # anywhere in the lower-cased text

# (name, pattern, triggers, kind, replacement)
TOKENS: list[tuple[str, str, tuple[str, ...], str, object]] = [
    # -- cloud providers --
    ("aws-access-key-id", r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
     ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"), P, whole),
    ("gcp-api-key", r"AIza[0-9A-Za-z_-]{35}", ("AIza",), P, whole),
    ("gcp-oauth-token", r"ya29\.[0-9A-Za-z_-]{20,}", ("ya29.",), P, whole),
    ("google-client-secret", r"GOCSPX-[0-9A-Za-z_-]{20,}", ("GOCSPX-",), P, whole),
    ("azure-ad-client-secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", ("Q~",), T,
     whole),
    ("azure-sas-signature", r"[?&;]sig=(?P<value>[A-Za-z0-9%+/=]{16,})", ("sig=",), I, value),
    ("alibaba-access-key", r"LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])", ("LTAI",), P, whole),
    ("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}", ("dop_v1_", "doo_v1_", "dor_v1_"), P, whole),
    ("databricks-token", r"dapi[a-f0-9]{32}", ("dapi",), P, whole),
    ("vault-token", r"hv[sb]\.[\w-]{24,}", ("hvs.", "hvb."), P, whole),
    ("doppler-token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", ("dp.",), P,
     whole),
    ("heroku-key", r"HRKU-[\w-]{30,}", ("HRKU-",), P, whole),
    ("fly-token", r"fo1_[\w-]{40,}", ("fo1_",), P, whole),
    ("supabase-token", r"sbp_[a-f0-9]{40}", ("sbp_",), P, whole),
    ("netlify-token", r"nfp_[A-Za-z0-9]{36}", ("nfp_",), P, whole),
    ("planetscale-token", r"pscale_(?:pw|tkn|oauth)_[\w.-]{32,}", ("pscale_",), P, whole),
    ("age-secret-key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", ("AGE-SECRET-KEY-1",), P, whole),
    # -- URL credentials and connection strings (scheme://user:PASSWORD@host) --
    ("url-credentials",
     r"://(?P<user>[^\s:/?#@\"'\\<>]*):(?P<value>[^\s/?#@\"'\\<>]+)@(?=[\w\[])",
     ("://",), T, value),
    ("curl-user", r"(?:\s-u|--user)[ =](?P<user>[^\s:\"'\\]+):(?P<value>[^\s\"'\\]+)",
     ("-u ", "--user"), T, value),
    # -- payment --
    ("stripe-key", r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}", ("sk_live_", "sk_test_",
     "rk_live_", "rk_test_"), P, whole),
    ("stripe-webhook-secret", r"whsec_[A-Za-z0-9]{24,}", ("whsec_",), P, whole),
    ("square-token", r"(?:sq0(?:atp|csp)-[\w-]{22,}|EAAA[\w-]{60,})",
     ("sq0atp-", "sq0csp-", "EAAA"), P,
     whole),
    # -- messaging --
    ("twilio-key", r"(?:SK|AC)[0-9a-fA-F]{32}(?![0-9A-Za-z])", ("SK", "AC"), P, whole),
    ("sendgrid-key", r"SG\.[\w-]{16,32}\.[\w-]{16,64}", ("SG.",), P, whole),
    ("slack-token", r"xox[abposre]-[A-Za-z0-9-]{10,}", ("xox",), P, whole),
    ("slack-app-token", r"xapp-\d-[A-Za-z0-9-]{10,}", ("xapp-",), P, whole),
    ("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}",
     ("hooks.slack.com",), I, whole),
    ("discord-webhook", r"discord(?:app)?\.com/api/webhooks/\d+/[\w-]{20,}", ("discord",),
     I, whole),
    ("discord-bot-token", r"[MNO][A-Za-z\d_-]{23,27}\.[\w-]{6}\.[\w-]{27,40}",
     ("discord", "bot"), I,
     whole),
    ("telegram-bot-token", r"\d{6,12}:AA[\w-]{30,40}(?![\w-])", (":AA",), T, whole),
    ("mailgun-key", r"key-[0-9a-f]{32}(?![0-9a-z])", ("key-",), P, whole),
    ("mailchimp-key", r"[0-9a-f]{32}-us\d{1,2}(?!\d)", ("-us",), T, whole),
    # -- version control, CI --
    ("github-token", r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{22,})",
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), P, whole),
    ("gitlab-token", r"(?:gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent)-[\w-]{20,}"
                     r"|GR1348941[\w-]{20,})",
     ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glimt-", "gloas-", "glsoat-",
      "glagent-", "GR1348941"), P, whole),
    ("atlassian-token", r"ATATT3[A-Za-z0-9_=-]{50,}", ("ATATT3",), P, whole),
    ("linear-key", r"lin_api_[A-Za-z0-9]{32,}", ("lin_api_",), P, whole),
    ("notion-token", r"(?:secret_|ntn_)[A-Za-z0-9]{43,}", ("secret_", "ntn_"), P, whole),
    ("sentry-token", r"sntr[ysu]_[A-Za-z0-9+/=_-]{40,}", ("sntr",), P, whole),
    ("grafana-token", r"gl(?:c|sa)_[A-Za-z0-9+/=_-]{32,}", ("glc_", "glsa_"), P, whole),
    ("postman-key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("PMAK-",), P, whole),
    ("newrelic-key", r"NRAK-[A-Z0-9]{27}", ("NRAK-",), P, whole),
    ("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shp",), P, whole),
    # -- package registries --
    ("npm-token", r"npm_[A-Za-z0-9]{36}", ("npm_",), P, whole),
    ("pypi-token", r"pypi-Ag[\w-]{40,}", ("pypi-Ag",), P, whole),
    ("docker-token", r"dckr_pat_[\w-]{24,}", ("dckr_pat_",), P, whole),
    ("rubygems-key", r"rubygems_[a-f0-9]{48}", ("rubygems_",), P, whole),
    # -- LLM providers (sk- covers OpenAI sk-proj-, Anthropic sk-ant-, OpenRouter sk-or-,
    #    DeepSeek and the other OpenAI-style keys) --
    ("llm-key", r"sk-[A-Za-z0-9_-]{20,}", ("sk-",), P, whole),
    ("huggingface-token", r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", ("hf_", "api_org_"), P, whole),
    ("groq-key", r"gsk_[A-Za-z0-9]{40,}", ("gsk_",), P, whole),
    ("replicate-token", r"r8_[A-Za-z0-9]{30,}", ("r8_",), P, whole),
    ("xai-key", r"xai-[A-Za-z0-9]{40,}", ("xai-",), P, whole),
    ("perplexity-key", r"pplx-[A-Za-z0-9]{40,}", ("pplx-",), P, whole),
    ("langsmith-key", r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}", ("lsv2_",), P, whole),
    # -- auth headers, JWTs --
    ("jwt", r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}", ("eyJ",), P, whole),
    ("bearer", r"[Bb]earer\s+(?P<value>[A-Za-z0-9._~+/=-]{16,})", ("bearer",), I, value),
    ("basic-auth", r"Basic\s+(?P<value>[A-Za-z0-9+/]{12,}={0,2})", ("Basic",), T, basic_auth),
    ("auth-header-token", r"(?i:authorization)[\"']?\s*:\s*[\"']?token\s+(?P<value>[\w.-]{16,})",
     ("authorization",), I, value),
]
