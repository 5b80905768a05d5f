"""More vendor token formats, as a table (issue 9: breadth).

Each row is a documented format: a literal prefix that names the vendor and
the shape of what follows (character class and length). The facts come from
the vendors' documentation as collected by the public catalogs (gitleaks,
Kingfisher, TruffleHog's detectors); the rules are written here. A format
already covered by ``rules.TOKEN_RULES`` is not repeated.

A prefix shorter than four characters gets an entropy floor through its body
so that words and identifiers never match.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VendorFormat", "VENDOR_FORMATS"]

# Character classes of token bodies.
HEX = "a-f0-9"
HEXU = "a-fA-F0-9"
ALNUM = "A-Za-z0-9"
LOWER = "a-z0-9"
UPPER = "A-Z0-9"
URLSAFE = r"A-Za-z0-9_\-"
B64 = "A-Za-z0-9+/"


@dataclass(frozen=True, slots=True)
class VendorFormat:
    id: str
    prefix: str        # literal, as the vendor issues it
    body: str          # character class of the rest
    min_len: int       # length of the body
    max_len: int
    keep: int = 0      # literal prefix characters kept in the mask (<= 4, only where the prefix names the kind)
    suffix: str = ""   # an optional literal-led regex tail (e.g. "_[a-f0-9]{40}")


F = VendorFormat

VENDOR_FORMATS: tuple[VendorFormat, ...] = (
    # ---- CI/CD, source, package registries ------------------------------------------
    F("buildkite-agent-token", "bkua_", HEX, 40, 40, keep=4),
    F("circleci-personal-token", "CCIPAT_", ALNUM, 22, 22, suffix=r"_[a-f0-9]{40}"),
    F("circleci-project-token", "CCIPRJ_", ALNUM, 22, 22, suffix=r"_[a-f0-9]{40}"),
    F("deno-deploy-token", "ddp_", ALNUM, 36, 36, keep=4),
    F("deno-deploy-org-token", "ddo_", ALNUM, 36, 36, keep=4),
    F("nuget-api-key", "oy2", LOWER, 43, 43),
    F("sonarqube-token", "sqp_", HEX, 40, 40, keep=4),
    F("sonarqube-user-token", "squ_", HEX, 40, 40, keep=4),
    F("sonarqube-analysis-token", "sqa_", HEX, 40, 40, keep=4),
    F("codacy-api-token", "cdc_", ALNUM, 40, 40),
    F("gitea-token", "gta_", ALNUM, 40, 40),
    F("jfrog-identity-token", "cmVmdGtuOjAxOj", ALNUM, 50, 80),
    F("travis-ci-token", "travis_", ALNUM, 22, 40),
    F("bitrise-token", "bitrise_", ALNUM, 40, 86),
    F("terraform-cloud-team-token", "tfc_", ALNUM, 40, 90),
    F("spacelift-api-key", "spacelift_", URLSAFE, 32, 64),
    # ---- hosting, infrastructure ------------------------------------------------------
    F("tailscale-api-key", "tskey-api-", ALNUM, 10, 20, suffix=r"-[A-Za-z0-9]{30,40}"),
    F("tailscale-auth-key", "tskey-auth-", ALNUM, 10, 20, suffix=r"-[A-Za-z0-9]{30,40}"),
    F("tailscale-oauth-client-secret", "tskey-client-", ALNUM, 10, 20, suffix=r"-[A-Za-z0-9]{30,40}"),
    F("tailscale-webhook-secret", "tskey-webhook-", ALNUM, 10, 20, suffix=r"-[A-Za-z0-9]{30,40}"),
    F("render-api-key", "rnd_", ALNUM, 32, 32, keep=4),
    F("neon-api-key", "napi_", LOWER, 64, 64, keep=4),
    F("scaleway-access-key", "SCW", UPPER, 17, 17),
    F("tencent-secret-id", "AKID", ALNUM, 32, 32, keep=4),
    F("infisical-service-token", "st.", r"a-f0-9\-", 36, 36, suffix=r"\.[a-f0-9]{32}\.[a-f0-9]{32}"),
    F("dropbox-short-lived-token", "sl.", URLSAFE, 130, 152),
    F("railway-api-token", "railway_", URLSAFE, 32, 64),
    F("koyeb-api-token", "koyeb_", URLSAFE, 40, 64),
    F("zeabur-api-key", "sk-zeabur-", ALNUM, 32, 64),
    F("convex-deploy-key", "prod:", r"a-z0-9\-", 10, 40, suffix=r"\|[A-Za-z0-9=]{40,120}"),
    # ---- observability -----------------------------------------------------------------
    F("honeycomb-ingest-key", "hcaik_", LOWER, 58, 58),
    F("honeycomb-configuration-key", "hcxik_", LOWER, 58, 58),
    F("posthog-personal-api-key", "phx_", ALNUM, 43, 47, keep=4),
    F("nightfall-api-key", "NF-", ALNUM, 32, 32),
    F("logzio-token", "logz_", ALNUM, 32, 40),
    F("axiom-api-token", "xaat-", r"a-f0-9\-", 36, 36, keep=4),
    F("axiom-personal-token", "xapt-", r"a-f0-9\-", 36, 36, keep=4),
    F("checkly-api-key", "cu_", HEX, 32, 32),
    F("rollbar-access-token", "rb_", HEX, 32, 32),
    F("groundcover-api-key", "gcak_", ALNUM, 32, 64),
    # ---- AI and data providers --------------------------------------------------------
    F("together-api-key", "tgp_v1_", URLSAFE, 43, 43),
    F("fireworks-api-key", "fw_", ALNUM, 24, 24),
    F("mistral-codestral-key", "cdstrl_", ALNUM, 32, 40),
    F("deepinfra-api-key", "di_", ALNUM, 32, 40),
    F("novita-api-key", "sk_novita_", URLSAFE, 32, 64),
    F("baseten-api-key", "bt_", URLSAFE, 32, 48),
    F("langfuse-secret-key", "sk-lf-", r"a-f0-9\-", 36, 36, keep=4),
    F("helicone-api-key", "sk-helicone-", r"a-z0-9\-", 30, 60),
    F("weaviate-api-key", "wcd_", ALNUM, 32, 64),
    F("qdrant-api-key", "qdr_", URLSAFE, 32, 64),
    F("assemblyai-api-key", "aai_", HEX, 32, 32),
    F("roboflow-api-key", "rf_", ALNUM, 20, 40),
    F("wandb-api-key-v1", "wandb_v1_", ALNUM, 40, 86),
    F("clarifai-pat", "clf_", HEX, 32, 32),
    # ---- collaboration, productivity -----------------------------------------------------
    F("clickup-personal-token", "pk_", "0-9", 6, 10, suffix=r"_[A-Z0-9]{32}"),
    F("asana-personal-access-token", "1/", "0-9", 16, 16, suffix=r":[a-f0-9]{32}"),
    F("asana-personal-access-token-v2", "2/", "0-9", 16, 16, suffix=r"/[0-9]{16}:[a-f0-9]{32}"),
    F("beamer-api-key", "b_", URLSAFE + "=", 44, 44),
    F("matrix-access-token", "syt_", ALNUM, 4, 40, suffix=r"_[A-Za-z0-9]{20}_[A-Za-z0-9]{6}"),
    F("intercom-access-token", "dG9rO", B64, 55, 60),
    F("zapier-webhook-path", "hooks.zapier.com/hooks/catch/", "0-9", 5, 12, suffix=r"/[a-z0-9]{6,12}"),
    F("webex-bot-token", "Y2lzY29zcGFyazovL", B64, 40, 200),
    F("calendly-api-key", "cal_live_", ALNUM, 32, 64),
    F("miro-access-token", "eyJtaXJv", URLSAFE, 40, 400),
    F("coda-api-token", "coda_", r"a-f0-9\-", 36, 36),
    F("todoist-api-token", "tdst_", HEX, 40, 40),
    F("airtable-oauth-token", "oaa", ALNUM, 14, 14, suffix=r"\.v1\.[A-Za-z0-9_-]{40,}"),
    F("linear-oauth-token", "lin_oauth_", ALNUM, 64, 64),
    F("retool-api-key", "retool_", ALNUM, 32, 64),
    # ---- payments, commerce -----------------------------------------------------------
    F("razorpay-key-id", "rzp_live_", ALNUM, 14, 14, keep=4),
    F("razorpay-test-key-id", "rzp_test_", ALNUM, 14, 14, keep=4),
    F("paystack-secret-key", "sk_live_", HEX, 40, 40),
    F("mollie-api-key", "live_", ALNUM, 30, 30),
    F("mollie-test-api-key", "test_", ALNUM, 30, 30),
    F("gocardless-access-token", "live_", URLSAFE + "=", 40, 40),
    F("plaid-access-token", "access-production-", r"a-f0-9\-", 36, 36),
    F("plaid-sandbox-access-token", "access-sandbox-", r"a-f0-9\-", 36, 36),
    F("klaviyo-private-key", "pk_", HEX, 34, 34),
    F("lemonsqueezy-api-key", "lmsq_", URLSAFE, 32, 64),
    F("paddle-api-key", "pdl_live_apikey_", ALNUM, 40, 60),
    F("adyen-api-key", "AQE", URLSAFE + "+/=", 80, 300),
    F("coinbase-cdp-key", "organizations/", r"a-f0-9\-", 36, 36, suffix=r"/apiKeys/[a-f0-9-]{36}"),
    F("lob-live-key", "live_", HEX, 35, 35),
    F("salesforce-session-id", "00D", ALNUM, 12, 15, suffix=r"![A-Za-z0-9._]{90,110}"),
    F("twitter-bearer-token", "AAAAAAAAAAAAAAAAAAAAA", "A-Za-z0-9%", 80, 120),
    # ---- messaging, email ---------------------------------------------------------------
    F("resend-api-key", "re_", ALNUM, 8, 8, suffix=r"_[A-Za-z0-9]{24}"),
    F("mailersend-api-token", "mlsn.", HEX, 64, 64),
    F("loops-api-key", "loops_", ALNUM, 32, 40),
    F("twitch-oauth-token", "oauth:", LOWER, 30, 30),
    F("teams-incoming-webhook", "webhook.office.com/webhookb2/", r"a-f0-9\-", 36, 36,
      suffix=r"@[a-f0-9-]{36}/IncomingWebhook/[a-f0-9]{32}/[a-f0-9-]{36}"),
    F("google-chat-webhook", "chat.googleapis.com/v1/spaces/", URLSAFE, 8, 20,
      suffix=r"/messages\?key=[A-Za-z0-9_-]{39}&token=[A-Za-z0-9_%=-]{40,80}"),
    F("line-channel-token", "line_", ALNUM, 40, 172),
    # ---- security, identity ---------------------------------------------------------------
    F("launchdarkly-api-key", "api-", r"a-f0-9\-", 36, 36),
    F("launchdarkly-sdk-key", "sdk-", r"a-f0-9\-", 36, 36),
    F("authress-service-key", "sc_", ALNUM, 20, 40, suffix=r"\.[A-Za-z0-9]{4}\.acc[_-][a-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}"),
    F("snyk-service-token", "snyk_", URLSAFE, 40, 64),
    F("wiz-client-secret", "wiz_", ALNUM, 40, 64),
    F("cloudsmith-api-key", "cs_", HEX, 40, 40),
    F("workos-api-key", "sk_live_", ALNUM, 60, 100),
    F("clerk-secret-key", "sk_live_", ALNUM, 40, 56),
    F("stytch-secret", "secret-live-", URLSAFE + "=", 36, 48),
    F("frontegg-api-token", "fgtk_", URLSAFE, 32, 64),
    # ---- CMS, content, misc -------------------------------------------------------------------
    F("sanity-token", "sk", ALNUM, 78, 200),
    F("storyblok-token", "sbt_", ALNUM, 24, 40),
    F("shopify-storefront-token", "shpsa_", HEXU, 32, 32),
    F("lokalise-api-token", "lok_", ALNUM, 40, 40),
    F("mux-token-secret", "mux_", B64, 60, 90),
    F("adafruit-io-key", "aio_", ALNUM, 28, 28, keep=4),
    F("apify-api-token", "apify_api_", ALNUM, 36, 36),
    F("browserstack-access-key", "bs_", ALNUM, 20, 40),
    F("ngrok-api-key", "ngrok_", URLSAFE, 40, 60),
    F("openweather-api-key", "owm_", HEX, 32, 32),
    F("etherscan-api-key", "ETH", UPPER, 31, 34),
    F("alchemy-api-key", "alcht_", ALNUM, 30, 40),
    F("infura-secret", "INFURA_", ALNUM, 32, 40),
    F("hcp-client-secret", "hcp_", URLSAFE, 40, 64),
    F("onepassword-connect-token", "eyJhbGciOiJFUzI1NiIsImtpZCI6", URLSAFE + ".", 100, 900),
    F("mapbox-temporary-token", "tk.eyJ", URLSAFE + ".", 40, 400),
    F("shortcut-api-token", "sct_", r"a-f0-9\-", 36, 36),
    F("segment-public-api-token", "sgp_", ALNUM, 64, 64),
    F("smartsheet-token", "smrt_", ALNUM, 37, 37),
    F("typeform-personal-token", "tfp_", URLSAFE + "=.", 40, 80),
)
