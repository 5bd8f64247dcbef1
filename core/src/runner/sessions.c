/* sessions.c - (added, issue 31) the box's terminal, port and archive
 * sessions, counted in all and per client (sessions.h). A session is held
 * by a client that is in the table, so the table has at most
 * RUNNER_SESSIONS_MAX rows: a fixed array, no allocation. */
#include "runner/sessions.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runner/auth.h"

struct row {
    char client[sizeof(((struct runner_client *)0)->name)];
    int open; /* 0: a free row */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct row rows[RUNNER_SESSIONS_MAX];
static int total;

/* Under mu: client's row, or NULL (with *free_row a row to take, if any). */
static struct row *row_of(const char *client, struct row **free_row)
{
    *free_row = NULL;
    for (int i = 0; i < RUNNER_SESSIONS_MAX; i++) {
        if (rows[i].open > 0 && strcmp(rows[i].client, client) == 0) {
            return &rows[i];
        }
        if (rows[i].open == 0 && *free_row == NULL) {
            *free_row = &rows[i];
        }
    }
    return NULL;
}

int runner_session_take(const char *client, char *why, size_t len)
{
    struct row *free_row;
    struct row *row;
    int status = 0;

    pthread_mutex_lock(&mu);
    row = row_of(client, &free_row);
    if (total >= RUNNER_SESSIONS_MAX) {
        snprintf(why, len,
                 "%d terminals and port connections are open on this box (limit %d): "
                 "try later",
                 total, RUNNER_SESSIONS_MAX);
        status = 503;
    }
    else if (row != NULL && row->open >= RUNNER_SESSIONS_PER_CLIENT) {
        snprintf(why, len,
                 "client '%s' has %d terminals and port connections open on this box "
                 "(limit %d): close one first",
                 client, row->open, RUNNER_SESSIONS_PER_CLIENT);
        status = 429;
    }
    else {
        if (row == NULL) { /* total < MAX: a row is free */
            row = free_row;
            snprintf(row->client, sizeof(row->client), "%s", client);
        }
        row->open++;
        total++;
    }
    pthread_mutex_unlock(&mu);
    return status;
}

void runner_session_give(const char *client)
{
    struct row *free_row;
    struct row *row;

    pthread_mutex_lock(&mu);
    row = row_of(client, &free_row);
    if (row != NULL) {
        row->open--;
        total--;
    }
    pthread_mutex_unlock(&mu);
}

int runner_sessions_open(const char *client, int *of_client)
{
    struct row *free_row;
    struct row *row;
    int n;

    pthread_mutex_lock(&mu);
    n = total;
    if (client != NULL && of_client != NULL) {
        row = row_of(client, &free_row);
        *of_client = row != NULL ? row->open : 0;
    }
    pthread_mutex_unlock(&mu);
    return n;
}
