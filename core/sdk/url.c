/* url.c - URL encoding and checks through libcurl's URL API (curl_url,
 * curl_easy_escape): no hand-written encoder or prefix test. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <string.h>
#include <strings.h>

#include "sbx/sbx_util.h"

/* The copy in libcurl's buffer is zeroed before it is freed: s may be a
 * secret (a client secret in a form body). */
char *sbx_url_escape(const char *s)
{
    char *enc = curl_easy_escape(NULL, s, (int)strlen(s));
    char *out;

    if (enc == NULL) {
        fputs("sbx: out of memory\n", stderr);
        abort();
    }
    out = xstrdup(enc);
    explicit_bzero(enc, strlen(enc)); /* s may be a secret (a form field) */
    curl_free(enc);
    return out;
}

/* The parsed URL's part, or NULL (caller curl_free()s). */
static char *part(CURLU *u, CURLUPart what)
{
    char *v = NULL;

    return curl_url_get(u, what, &v, 0) == CURLUE_OK ? v : NULL;
}

static CURLU *parse_http(const char *url)
{
    CURLU *u = curl_url();
    char *scheme;
    int ok;

    if (u == NULL || url == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        return NULL;
    }
    scheme = part(u, CURLUPART_SCHEME);
    ok = scheme != NULL && (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0);
    curl_free(scheme);
    if (!ok) {
        curl_url_cleanup(u);
        return NULL;
    }
    return u;
}

int sbx_url_is_loopback(const char *url)
{
    CURLU *u = parse_http(url);
    char *host = u ? part(u, CURLUPART_HOST) : NULL;
    struct in_addr a4;
    struct in6_addr a6;
    int yes = 0;

    if (host != NULL) {
        size_t n = strlen(host);

        if (strcasecmp(host, "localhost") == 0) {
            yes = 1;
        }
        else if (inet_pton(AF_INET, host, &a4) == 1) {
            yes = (ntohl(a4.s_addr) >> 24) == 127;
        }
        else if (n > 2 && host[0] == '[' && host[n - 1] == ']') {
            char inner[64];

            if (n - 2 < sizeof(inner)) {
                memcpy(inner, host + 1, n - 2);
                inner[n - 2] = '\0';
                yes = inet_pton(AF_INET6, inner, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
            }
        }
    }
    curl_free(host);
    curl_url_cleanup(u);
    return yes;
}

int sbx_url_is_http_base(const char *url)
{
    CURLU *u = parse_http(url);
    char *host = u ? part(u, CURLUPART_HOST) : NULL;
    char *query = u ? part(u, CURLUPART_QUERY) : NULL;
    char *frag = u ? part(u, CURLUPART_FRAGMENT) : NULL;
    char *user = u ? part(u, CURLUPART_USER) : NULL;
    int ok = host != NULL && host[0] != '\0' && query == NULL && frag == NULL && user == NULL;

    curl_free(host);
    curl_free(query);
    curl_free(frag);
    curl_free(user);
    curl_url_cleanup(u);
    return ok;
}
