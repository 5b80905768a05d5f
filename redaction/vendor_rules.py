"""Vendor token formats with a literal prefix, as TokenRules (issue 9: breadth, second round).

Each rule is one documented format: the literal prefix the vendor issues and
the exact length and alphabet of what follows, as recorded by the public
catalogs (gitleaks, Kingfisher, TruffleHog, Betterleaks) and the vendors' own
documentation. Formats already covered by ``rules.TOKEN_RULES`` or the table
of ``vendor_formats`` are not repeated.

Every rule has a right boundary, an entropy floor on the whole secret and a
body check (digits plus mixed case or letters, where the alphabet allows), so
an identifier that merely starts with a prefix never matches. ``keep`` is the
literal prefix (at most 4 characters) where it names the kind.

Imported at the bottom of ``rules.py``; uses only names defined above that point.
"""

from __future__ import annotations

from .entropy import shannon
from .rules import ALNUM, E64, E_, E, TokenRule, _has_digit, _literal_prefix, _mixed

__all__ = ["VENDOR_TOKEN_RULES"]


def _random_body(prefix_len: int, strict: bool):
    """Check: the body after the literal prefix looks generated."""

    def check(secret: str) -> bool:
        body = secret[prefix_len:]
        if not (_has_digit(body) and _mixed(body)):
            return False
        return not strict or shannon(body) >= 3.5

    check.__qualname__ = f"_random_body.<{prefix_len},{int(strict)}>"  # stable in the fingerprint
    return check


def _t(rule_id: str, pattern: str, keep: int = 0, entropy: float = 3.0, body: bool = True, **kw) -> TokenRule:
    lit = _literal_prefix(pattern)
    if body and "check" not in kw:
        # Short prefixes (<= 3 characters) also need a high-entropy body.
        kw["check"] = _random_body(len(lit), strict=len(lit) <= 3)
    if len(lit) <= 3 and not kw.get("run_gates"):
        entropy = max(entropy, 3.5)
    return TokenRule(rule_id, pattern, keep=keep, entropy=entropy, **kw)


def _gated(rule_id: str, pattern: str, gate: str, lead: str, entropy: float = 3.5) -> TokenRule:
    """A format whose literal marker sits inside the token (Microsoft's
    identifiable keys): searched only in runs holding the marker, with its own
    left boundary."""
    return TokenRule(rule_id, f"(?<![{lead}])" + pattern, entropy=entropy, run_gates=(gate,), left=None)


URLS = "A-Za-z0-9_-"
B64 = "A-Za-z0-9+/"
UUID = "[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"

VENDOR_TOKEN_RULES: tuple[TokenRule, ...] = (
    # ---- Microsoft identifiable keys (marker inside the key) ----------------------------
    _gated("azure-storage-identifiable-key", r"[A-Za-z0-9/+]{76}\+ASt[A-Za-z0-9/+]{5}[AQgw]==" + E64, "+ASt", B64),
    _gated("azure-cosmosdb-identifiable-key", r"[A-Za-z0-9/+]{76}ACDb[A-Za-z0-9/+]{5}[AQgw]==" + E64, "ACDb", B64),
    _gated("azure-apim-identifiable-key", r"[A-Za-z0-9/+]{76}APIM[A-Za-z0-9/+]{5}[AQgw]==" + E64, "APIM", B64),
    _gated("azure-servicebus-identifiable-key", r"[A-Za-z0-9/+]{33}\+ASb[A-Za-z0-9/+]{5}[AEIMQUYcgkosw048]=" + E64,
           "+ASb", B64),
    _gated("azure-eventhub-identifiable-key", r"[A-Za-z0-9/+]{33}\+AEh[A-Za-z0-9/+]{5}[AEIMQUYcgkosw048]=" + E64,
           "+AEh", B64),
    _gated("azure-relay-identifiable-key", r"[A-Za-z0-9/+]{33}\+ARm[A-Za-z0-9/+]{5}[AEIMQUYcgkosw048]=" + E64,
           "+ARm", B64),
    _gated("azure-search-identifiable-key", r"[A-Za-z0-9]{42}AzSe[A-D][A-Za-z0-9]{5}" + E, "AzSe", "A-Za-z0-9"),
    _gated("azure-functions-identifiable-key", r"[A-Za-z0-9_-]{44}AzFu[A-Za-z0-9_-]{5}[AQgw]==" + E64, "AzFu",
           URLS),
    _gated("azure-container-registry-key", r"[A-Za-z0-9/+]{42}\+ACR[A-D][A-Za-z0-9]{5}" + E64, "+ACR", B64),
    _gated("azure-devops-pat", r"[A-Za-z0-9]{52}JQQJ9[9DH][A-Za-z0-9][A-L][AQgw]AZDO[A-Za-z0-9]{4}" + E, "AZDO",
           "A-Za-z0-9"),
    _gated("azure-cognitive-services-key", r"[A-Za-z0-9]{52}JQQJ9[9DH][A-Za-z0-9][A-L][AQgw][A-Za-z0-9]{14}" + E,
           "JQQJ9", "A-Za-z0-9"),
    _gated("new-relic-license-key", r"[a-f0-9]{36}NRAL" + E, "NRAL", "A-Za-z0-9"),
    # ---- CI/CD, source, package registries ----------------------------------------------
    _t("buildkite-agent-access-token", r"bkaa_[A-Za-z0-9_-]{75}" + E_, keep=4),
    _t("buildkite-agent-job-token", r"bkaj_[A-Za-z0-9_-]{333}" + E_, keep=4),
    _t("buildkite-agent-registration-token", r"bkar_[A-Za-z0-9_-]{73}" + E_, keep=4),
    _t("buildkite-cluster-token", r"bkct_[A-Za-z0-9_-]{73}" + E_, keep=4),
    _t("buildkite-packages-token", r"bkpt_[A-Za-z0-9_-]{199}" + E_, keep=4),
    _t("buildkite-portal-token", r"bkpat_[A-Za-z0-9_-]{54}" + E_),
    _t("buildkite-portal-secret", r"bkps_[A-Za-z0-9_-]{64}" + E_, keep=4),
    _t("crates-io-api-token", r"cio[A-Za-z0-9]{32}" + E),
    _t("deepsource-pat", r"dsp_[a-f0-9]{40}" + E, keep=4),
    _t("mergify-application-key", r"mergify_application_key_[A-Za-z0-9_-]{40,200}" + E_),
    _t("aikido-ci-token", r"AIK_CI_[A-Za-z0-9]{20,44}" + E),
    _t("aikido-client-secret", r"AIK_SECRET_[A-Za-z0-9]{64}" + E),
    _t("socket-api-key", r"sktsec_[A-Za-z0-9_-]{40,80}" + E_),
    _t("teamcity-access-token", r"eyJ0eXAiOiAiVENWMiJ9\.[A-Za-z0-9_-]{36}\.[A-Za-z0-9_-]{48}" + E_, keep=3,
       body=False, entropy=3.5),
    _t("docker-swarm-join-token", r"SWMTKN-1-[a-z0-9]{50}-[a-z0-9]{25}" + E),
    _t("docker-swarm-join-token-fips", r"SWMTKN-2-1-[a-z0-9]{50}-[a-z0-9]{25}" + E),
    _t("docker-swarm-unlock-key", r"SWMKEY-1-[A-Za-z0-9+/]{43}" + E64),
    _t("portainer-access-token", r"ptr_[A-Za-z0-9+/]{43}=" + E64, keep=4),
    _t("rancher-api-token", r"token-[a-z0-9]{5}:[a-z0-9]{54}" + E),
    _t("configcat-key", r"configcat-sdk-1/[A-Za-z0-9_-]{22}/[A-Za-z0-9_-]{22}" + E_),
    _t("flagsmith-server-key", r"ser\.[A-Za-z0-9]{22}" + E),
    _t("statsig-server-secret", r"secret-[A-Za-z0-9]{43}" + E),
    _t("devcycle-server-sdk-key", r"dvc_server_[A-Za-z0-9_-]{20,80}" + E_),
    # ---- hosting, infrastructure, databases -------------------------------------------
    _t("vercel-integration-token", r"vci_[A-Za-z0-9]{24,100}" + E, keep=4),
    _t("vercel-app-access-token", r"vca_[A-Za-z0-9]{24,100}" + E, keep=4),
    _t("vercel-app-refresh-token", r"vcr_[A-Za-z0-9]{24,100}" + E, keep=4),
    _t("vercel-ai-gateway-key", r"vck_[A-Za-z0-9]{24,100}" + E, keep=4),
    _t("databricks-oauth-secret", r"dose[a-f0-9]{32}" + E, keep=4),
    _t("mongodb-atlas-service-account-secret", r"mdb_sa_sk_[A-Za-z0-9_-]{40,48}" + E_),
    _t("aiven-service-password", r"AVNS_[A-Za-z0-9_-]{19}" + E_, keep=4),
    _t("cockroachlabs-cloud-api-key", r"CCDB1_[A-Za-z0-9]{22}_[A-Za-z0-9]{40}" + E),
    _t("datastax-astra-token", r"AstraCS:[A-Za-z0-9]{20,32}:[a-f0-9]{64}" + E),
    _t("elastic-cloud-api-key", r"essu_[A-Za-z0-9_-]{60,200}={0,2}" + E64, keep=4),
    _t("xata-api-key", r"xau_[A-Za-z0-9]{32,64}" + E, keep=4),
    _t("fauna-secret", r"fn[AE][A-Za-z0-9_-]{37}" + E_),
    _t("tinybird-token", r"p\.eyJ[A-Za-z0-9_-]{40,400}\.[A-Za-z0-9_-]{20,100}" + E_, body=False, entropy=3.5),
    _t("upcloud-api-token", r"ucat_[A-Za-z0-9]{24,32}" + E, keep=4),
    _t("akamai-edgegrid-token", r"akab-[a-z0-9]{16}-[a-z0-9]{16}" + E, keep=4),
    _t("yandex-aws-access-token", r"YC[A-Za-z0-9_-]{38}" + E_),
    _t("yandex-iam-token", r"t1\.[A-Za-z0-9_-]{20,600}={0,2}\.[A-Za-z0-9_-]{86}={0,2}" + E64),
    _t("backblaze-b2-application-key", r"K[0-9]{3}[A-Za-z0-9+/]{27}" + E64, entropy=3.5),
    _t("cloudflare-tunnel-token", r"eyJhIjoi[A-Za-z0-9+/]{100,400}={0,2}" + E64, keep=3, body=False, entropy=3.5),
    _t("bitwarden-access-token", r"0\." + UUID + r"\.[A-Za-z0-9]{30}:[A-Za-z0-9+/]{22}==" + E64, body=False),
    # ---- observability, incident, flags -----------------------------------------------------
    _t("new-relic-rest-api-key", r"NRRA-[a-f0-9]{42}" + E, keep=4),
    _t("pagerduty-user-token", r"u\+[A-Za-z0-9_+-]{18}" + E_, entropy=3.5),
    _t("rootly-api-token", r"rootly_[a-f0-9]{64}" + E),
    # ---- AI and data providers ------------------------------------------------------------
    _t("nvidia-api-key", r"nvapi-[A-Za-z0-9_-]{64}" + E_),
    _t("firecrawl-api-key", r"fc-[a-f0-9]{32}" + E),
    _t("jina-api-key", r"jina_[A-Za-z0-9_-]{50,70}" + E_),
    _t("voyage-api-key", r"pa-[A-Za-z0-9_-]{43}" + E_),
    _t("runpod-api-key", r"rpa_[A-Za-z0-9]{40,50}" + E, keep=4),
    _t("e2b-api-key", r"e2b_[a-f0-9]{40}" + E, keep=4),
    _t("browserbase-api-key", r"bb_live_[A-Za-z0-9_-]{24,40}" + E_),
    _t("openai-session-token", r"sess-[A-Za-z0-9]{40}" + E),
    _t("llamacloud-api-key", r"llx-[A-Za-z0-9]{44,52}" + E, keep=4),
    _t("cartesia-api-key", r"sk_car_[A-Za-z0-9_]{20,40}" + E),
    _t("anyscale-api-key", r"esecret_[A-Za-z0-9]{26,40}" + E),
    _t("daytona-api-key", r"dtn_[a-f0-9]{64}" + E, keep=4),
    _t("modal-token-secret", r"as-[A-Za-z0-9]{22}" + E_),
    _t("mem0-api-key", r"m0-[A-Za-z0-9]{24,44}" + E_),
    _t("dify-api-key", r"app-[A-Za-z0-9]{24}" + E_),
    _t("neptune-api-token", r"eyJhcGlfYWRkcmVzcyI6[A-Za-z0-9+/]{40,400}={0,2}" + E64, keep=3, body=False,
       entropy=3.5),
    _t("gemini-authorization-api-key", r"AQ\.Ab8RN6[A-Za-z0-9_-]{44}" + E_),
    _t("devin-api-key-user", r"apk_user_[A-Za-z0-9+/]{120,180}={0,2}" + E64),
    _t("devin-api-key", r"apk_[A-Za-z0-9+/]{80,100}={0,2}" + E64, keep=4),
    _t("devin-credential", r"cog_[a-z2-7]{52}" + E, keep=4),
    _t("brave-search-api-key", r"BSA[A-Za-z0-9_-]{24,40}" + E_),
    _t("unkey-root-key", r"unkey_[A-Za-z0-9]{20,32}" + E),
    # ---- collaboration, CRM, content --------------------------------------------------------
    _t("contentful-personal-access-token", r"CFPAT-[A-Za-z0-9_-]{43}" + E_),
    _t("hubspot-private-app-token", r"pat-(?:na|eu)1-" + UUID + E, keep=4, body=False),
    _t("defined-networking-api-token", r"dnkey-[a-z0-9=_-]{26}-[a-z0-9=_-]{52}" + E_),
    _t("postman-collection-access-key", r"PMAT-[0-9A-Z]{26}" + E, keep=4),
    _t("canva-client-secret", r"cnvca[A-Za-z0-9_-]{51}" + E_),
    _t("samsara-api-token", r"samsara_api_[A-Za-z0-9]{26,32}" + E),
    _t("val-town-api-token", r"vtwn_[A-Za-z0-9_-]{20,80}" + E_, keep=4),
    _t("lichess-personal-access-token", r"lip_[A-Za-z0-9_]{16,60}" + E, keep=4),
    _t("thunderstore-api-token", r"tss_[A-Za-z0-9]{36}" + E, keep=4),
    _t("workato-developer-api-token",
       r"wrka(?:eu|jp|sg|au|il|cn|kr)?-eyJ[A-Za-z0-9_-]{8,997}\.[A-Za-z0-9_-]{16,1000}\.[A-Za-z0-9_-]{64,1000}" + E_,
       keep=4, body=False, entropy=3.5),
    _t("salesforce-consumer-key", r"3MVG9[A-Za-z0-9._]{80,85}" + E),
    _t("zoho-oauth-token", r"1000\.[a-f0-9]{32}\.[a-f0-9]{32}" + E),
    _t("onesignal-api-key", r"os_v2_(?:app|org)_[a-z2-7]{103}" + E),
    _t("persona-api-key", r"persona_(?:production|sandbox)_[a-z0-9_-]{20,80}" + E_),
    _t("proof-api-key", r"prf_(?:test_)?[A-Za-z0-9_-]{20,80}" + E_),
    _t("polar-access-token", r"polar_(?:at|oat|pat)_[A-Za-z0-9_-]{20,100}" + E_),
    _t("onfido-api-token", r"api_(?:live|sandbox)(?:_ca|_us)?\.[A-Za-z0-9_-]{20,80}" + E_),
    _t("imagekit-private-key", r"private_[A-Za-z0-9+/]{27}=" + E64),
    _t("foursquare-api-key", r"fsq3[A-Za-z0-9+/]{40,48}={0,2}" + E64, keep=4),
    # ---- social, marketplaces -----------------------------------------------------------------
    _t("instagram-access-token", r"IGQV[A-Za-z0-9_-]{100,400}" + E_, keep=4),
    _t("instagram-graph-token", r"IGAA[A-Za-z0-9_-]{100,400}" + E_, keep=4),
    _t("pinterest-access-token", r"pina_[A-Za-z0-9_-]{20,200}" + E_, keep=4),
    _t("amazon-mws-auth-token", r"amzn\.mws\." + UUID + E, body=False),
    _t("amazon-oauth-client-secret", r"amzn1\.oa2-cs\.v1\.[a-f0-9]{64}" + E),
    _t("amazon-lwa-access-token", r"Atza\|[A-Za-z0-9_-]{100,600}" + E_, keep=4),
    _t("amazon-lwa-refresh-token", r"Atzr\|[A-Za-z0-9_-]{100,600}" + E_, keep=4),
    _t("roblox-security-cookie",
       r"_\|WARNING:-DO-NOT-SHARE-THIS\.--Sharing-this-will-allow-someone-to-log-in-as-you-and-to-steal-your-"
       r"ROBUX-and-items\.\|_(?P<s>[A-F0-9]{200,2000})" + E, body=False, left=None),
    # ---- payments, finance, crypto -------------------------------------------------------------
    _t("xendit-secret-key", r"xnd_(?:production|development)_[A-Za-z0-9]{56,72}" + E),
    _t("mercadopago-access-token", r"APP_USR-[0-9]{16}-[0-9]{6}-[a-f0-9]{32}-[0-9]{6,10}" + E, body=False),
    _t("mercadopago-test-access-token", r"TEST-[0-9]{16}-[0-9]{6}-[a-f0-9]{32}-[0-9]{6,10}" + E, body=False),
    _t("midtrans-server-key", r"Mid-server-[A-Za-z0-9_-]{20,32}" + E_),
    _t("midtrans-sandbox-server-key", r"SB-Mid-server-[A-Za-z0-9_-]{20,32}" + E_),
    _t("mercury-api-token", r"mercury_production_[a-z]{3,6}_[A-Za-z0-9]{40,50}_yrucrem" + E),
    _t("asaas-api-token", r"aact_(?:prod|hmlg)_[A-Za-z0-9_-]{20,100}" + E_, left=ALNUM + "."),
    _t("braintree-sandbox-access-token", r"access_token\$sandbox\$[a-z0-9]{16}\$[a-f0-9]{32}" + E, body=False),
    _t("square-sandbox-secret", r"sandbox-sq0csb-[A-Za-z0-9_-]{43}" + E_),
    _t("flutterwave-secret-key", r"FLWSECK-[a-f0-9]{32}-X" + E),
    _t("flutterwave-encryption-key", r"FLWSECK_TEST[a-f0-9]{12}" + E, body=False),
    _t("encoded-live-secret-key", r"sk_live_a2V5Xz[A-Za-z0-9+/]{69}=?" + E64),
    _t("courier-auth-token", r"pk_(?:prod|test)_[A-Z0-9]{28}" + E),
    _t("woocommerce-consumer-key", r"ck_[a-f0-9]{40}" + E),
    _t("blockfrost-mainnet-project-id", r"mainnet[A-Za-z0-9]{32}" + E),
    _t("blockfrost-preprod-project-id", r"preprod[A-Za-z0-9]{32}" + E),
    _t("blockfrost-preview-project-id", r"preview[A-Za-z0-9]{32}" + E),
    _t("blockfrost-testnet-project-id", r"testnet[A-Za-z0-9]{32}" + E),
    _t("blockfrost-ipfs-project-id", r"ipfs[A-Za-z0-9]{32}" + E),
    # ---- messaging, email -------------------------------------------------------------------
    _t("slack-session-token", r"xoxc-[0-9]{9,15}-[0-9]{9,15}-[0-9]{9,15}-[a-f0-9]{64}" + E, keep=4),
    _t("slack-session-cookie", r"xoxd-[A-Za-z0-9+/_%-]{100,1000}={0,2}" + E64, keep=4),
    _t("mandrill-api-key", r"md-[A-Za-z0-9_-]{22}" + E_),
    _t("smtp2go-api-key", r"api-[A-F0-9]{32}" + E, keep=4),
    _t("telnyx-api-key", r"KEY[0-9A-Za-z_-]{55}" + E_),
    # ---- round two: more prefixed formats ---------------------------------------------------
    _t("gocardless-sandbox-token", r"sandbox_[A-Za-z0-9_=-]{40}" + E_),
    _t("mollie-organization-access-token", r"access_[A-Za-z0-9]{40}" + E),
    _t("lob-test-key", r"test_[a-f0-9]{35}" + E),
    _t("plaid-dev-access-token", r"access-development-" + UUID + E, body=False),
    _t("checkout-sandbox-secret-key", r"sk_sbox_[a-z0-9]{26}" + E),
    _t("paddle-sandbox-api-key", r"pdl_sdbx_apikey_[a-z0-9]{26}_[A-Za-z0-9]{22}_[A-Za-z0-9]{3}" + E),
    _t("trigger-dev-secret-key", r"tr_(?:dev|prod|stg)_[A-Za-z0-9]{20,40}" + E),
    _t("inngest-signing-key", r"signkey-(?:prod|test|branch)-[a-f0-9]{64}" + E),
    _t("liveblocks-secret-key", r"sk_(?:prod|dev)_[A-Za-z0-9_-]{40,80}" + E_),
    _t("volcengine-access-key-id", r"AKLT[A-Za-z0-9_-]{40,60}" + E_, keep=4),
    _t("vk-access-token", r"vk1\.a\.[A-Za-z0-9_-]{100,300}" + E_),
    _t("shopify-partner-api-token", r"prtapi_[a-f0-9]{32}" + E),
    _t("wix-api-key", r"IST\.eyJ[A-Za-z0-9_-]{40,1000}\.[A-Za-z0-9_-]{40,1000}\.[A-Za-z0-9_-]{40,1000}" + E_,
       body=False, entropy=3.5),
    _t("clearbit-secret-key", r"sk_[a-f0-9]{32}" + E),
    _t("ory-personal-access-token", r"ory_pat_[A-Za-z0-9]{32,64}" + E),
    _t("permit-api-key", r"permit_key_[A-Za-z0-9]{60,140}" + E),
    _t("covalent-api-key", r"ckey_[a-z0-9]{27}" + E, keep=4),
    _t("coingecko-api-key", r"CG-[A-Za-z0-9]{24}" + E),
    _t("dbt-cloud-service-token", r"dbtc_[A-Za-z0-9_-]{40,70}" + E_, keep=4),
    _t("dbt-cloud-personal-token", r"dbtu_[A-Za-z0-9_-]{40,70}" + E_, keep=4),
    _t("dagster-cloud-user-token", r"user:[a-f0-9]{32}" + E),
)


def _catalog_rules() -> tuple[TokenRule, ...]:
    """Password hashes and prefixed formats of ``catalog`` (issue 34)."""
    from .catalog import HASH_FORMATS, VENDOR_FORMATS

    out = []
    for rule_id, pattern, kw in HASH_FORMATS + VENDOR_FORMATS:
        kw = dict(kw)
        # Hashes are structural: ".." or "//" inside one is not a filler.
        out.append(TokenRule(rule_id, pattern, fillers=rule_id not in {h[0] for h in HASH_FORMATS}, **kw))
    return tuple(out)


VENDOR_TOKEN_RULES = VENDOR_TOKEN_RULES + _catalog_rules()
