/* names.h - the relay's transparent path (docs/egress.md, "Without proxy variables"):
 * a resolver that gives each name the policy allows its own loopback address, and the
 * listener the sandbox's netns redirects TCP to, which maps the address back to the
 * name and hands the socket to the proxy as a CONNECT to NAME:PORT. */
#ifndef SBX_RELAY_NAMES_H
#define SBX_RELAY_NAMES_H

#include <stddef.h>
#include <sys/un.h>

/* Names get 127.100.0.1 upwards, one each, for the sandbox's life; the sandbox's netns
 * redirects TCP to that /16 (and to addresses off loopback) to the relay. */
#define SBX_RELAY_NAME_NET "127.100.0.0/16"
#define SBX_RELAY_NAMES_MAX 4096
/* (added) Names the policy denies get 127.101.0.1 upwards, one each, bounded the same
 * way: a connection to one is handed to the proxy marked denied ("\x03NAME:PORT\n"),
 * which answers it with the refusal and never connects it anywhere. */
#define SBX_RELAY_DENY_NET "127.101.0.0/16"
#define SBX_RELAY_DENIED_MAX 4096

/* The proxy's answer for NAME: 1 allowed, 0 denied (text: the reason to show), -1 no
 * answer (text says why). */
int sbx_relay_ask(const struct sockaddr_un *sun, const char *name, char *text, size_t size);

/* Answers one DNS query of n bytes in q into out[size]; returns the answer's length, 0
 * for none. ask is sbx_relay_ask (or a test's). */
typedef int (*sbx_relay_ask_fn)(const struct sockaddr_un *sun, const char *name, char *text,
                                size_t size);
size_t sbx_relay_dns_reply(const unsigned char *q, size_t n, unsigned char *out, size_t size,
                           sbx_relay_ask_fn ask, const struct sockaddr_un *sun);

/* The name given the loopback address a (host order), or NULL. */
const char *sbx_relay_name_of(unsigned a);
/* (added) The denied name given the deny address a (host order), or NULL. */
const char *sbx_relay_denied_name_of(unsigned a);
/* Frees both tables (tests). */
void sbx_relay_names_reset(void);

/* Serves one datagram on the resolver's UDP socket fd. */
void sbx_relay_dns_serve(int fd, const struct sockaddr_un *sun);
/* Accepts one redirected connection on fd and hands it to the proxy (with attribute,
 * followed by the relay's attribution line, attr.h). */
void sbx_relay_transparent_accept(int fd, const struct sockaddr_un *sun, int attribute);

#endif
