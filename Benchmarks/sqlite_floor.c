/* The SQLite store's claim and completion statements in C, against the SQLite that sqlite-nio vendors: the floor
 * under the store phase's CPU figure when no Swift runs (Benchmarks/README.md, "SQLite store CPU, stop 24").
 * Built and run by Benchmarks/sqlite-floor.sh. Usage: sqlite_floor stop23|stop24|stop25|cell26 ROWS DBPATH
 *   stop23: schema 2 (the finishing trigger on UPDATE OF state), a claim returning every column, a finish as
 *           stop 23's UPDATE … FROM (VALUES …) for every kind (the kind a parameter) that the trigger moves.
 *   stop24: schema 3 (that trigger on UPDATE OF last_state, norq_history_moved), a claim returning 12 columns, a
 *           finish as INSERT INTO norq_history … SELECT … FROM json_each(the rows as JSON) CROSS JOIN norq_outbox.
 *   stop25: stop 24's statements with the claim's LIMIT written into the text (a bound LIMIT makes SQLite prepare
 *           the claim again at its first step), the finish's rows as one flat JSON object {"<id>:<token>": message
 *           id} and 8 KiB pages ("SQLite store CPU, stop 25").
 *   cell26: stop 25's with the claim's UPDATE returning nothing and its rows read as one text cell by a SELECT
 *           through the index of leased rows (group_concat of printf's SQL literals): tried at stop 26 and not kept
 *           ("SQLite store CPU, stop 26"; MODES=cell26 in sqlite-floor.sh).
 * Statements are prepared for every batch and their values bound, as SQLiteNIO does. Prints CPU s per 10,000 rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sqlite_nio_sqlite3.h"

#define S(x) sqlite_nio_sqlite3_##x
#define BATCH 256
#define COLS "id, send_id, position, target, identity, provider, recipient_id, state, attempts, next_attempt_at, " \
    "lease_owner, lease_token, lease_expires_at, message_id, may_have_been_delivered, last_state, last_status, " \
    "last_reason, last_code, last_classification, last_invalid_since, last_message_id"

static sqlite3 *db;

static void run(const char *sql) {
    char *error = 0;
    if (S(exec)(db, sql, 0, 0, &error) != SQLITE_OK) { fprintf(stderr, "%s\n%.400s\n", error, sql); exit(1); }
}

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static const char *schema =
    "CREATE TABLE norq_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, send_id TEXT NOT NULL, position INTEGER NOT NULL,"
    " target TEXT NOT NULL, identity TEXT NOT NULL, provider TEXT, recipient_id TEXT, state TEXT NOT NULL,"
    " attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL, lease_owner TEXT, lease_token TEXT,"
    " lease_expires_at INTEGER, message_id TEXT, may_have_been_delivered INTEGER NOT NULL DEFAULT 0, last_state TEXT,"
    " last_status INTEGER, last_reason TEXT, last_code TEXT, last_classification TEXT, last_invalid_since INTEGER,"
    " last_message_id TEXT);"
    "CREATE INDEX norq_outbox_due ON norq_outbox (next_attempt_at) WHERE state = 'pending';"
    "CREATE INDEX norq_outbox_leases ON norq_outbox (lease_expires_at) WHERE state = 'leased';"
    "CREATE INDEX norq_outbox_send ON norq_outbox (send_id, position);"
    "CREATE TABLE norq_history (id INTEGER PRIMARY KEY, send_id TEXT NOT NULL, position INTEGER NOT NULL,"
    " target TEXT NOT NULL, identity TEXT NOT NULL, provider TEXT, recipient_id TEXT, state TEXT NOT NULL,"
    " attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL, lease_owner TEXT, lease_token TEXT,"
    " lease_expires_at INTEGER, message_id TEXT, may_have_been_delivered INTEGER NOT NULL, last_state TEXT,"
    " last_status INTEGER, last_reason TEXT, last_code TEXT, last_classification TEXT, last_invalid_since INTEGER,"
    " last_message_id TEXT, finished_at INTEGER NOT NULL);"
    "CREATE INDEX norq_history_send ON norq_history (send_id, position);"
    "CREATE INDEX norq_history_finished ON norq_history (finished_at);"
    "CREATE TABLE norq_invalid_tokens (token TEXT PRIMARY KEY, provider TEXT, reason TEXT NOT NULL,"
    " invalid_since INTEGER NOT NULL, recorded_at INTEGER NOT NULL, registered_at INTEGER);";

/* The body of norq_outbox_finished (schema 2 and 3), after its header. */
static const char *finishedBody =
    " WHEN NEW.state NOT IN ('pending', 'leased') BEGIN"
    " INSERT INTO norq_history (" COLS ", finished_at) VALUES (NEW.id, NEW.send_id, NEW.position, NEW.target,"
    " NEW.identity, NEW.provider, NEW.recipient_id, NEW.state, NEW.attempts, NEW.next_attempt_at, NULL, NULL, NULL,"
    " NEW.message_id, NEW.may_have_been_delivered, NEW.last_state, NEW.last_status, NEW.last_reason, NEW.last_code,"
    " NEW.last_classification, NEW.last_invalid_since, NEW.last_message_id, NEW.lease_expires_at);"
    " INSERT INTO norq_invalid_tokens (token, provider, reason, invalid_since, recorded_at)"
    " SELECT NEW.identity, NEW.provider, coalesce(NEW.last_reason, 'invalid'),"
    " coalesce(NEW.last_invalid_since, NEW.lease_expires_at), NEW.lease_expires_at"
    " WHERE NEW.last_classification = 'token-invalid'"
    " ON CONFLICT(token) DO UPDATE SET provider = excluded.provider, reason = excluded.reason,"
    " invalid_since = excluded.invalid_since, recorded_at = excluded.recorded_at"
    " WHERE excluded.invalid_since >= norq_invalid_tokens.invalid_since;"
    " DELETE FROM norq_outbox WHERE id = NEW.id; END";

static const char *claimHead =
    "UPDATE norq_outbox SET may_have_been_delivered = CASE WHEN state = 'leased' THEN 1 ELSE may_have_been_delivered END,"
    " state = 'leased', attempts = attempts + 1, lease_owner = ?1, lease_token = ?2 || '-' || id, lease_expires_at = ?3"
    " WHERE id IN (SELECT id FROM norq_outbox WHERE state = 'pending' AND next_attempt_at <= ?4 UNION ALL"
    " SELECT id FROM norq_outbox WHERE state = 'leased' AND lease_expires_at <= ?4 LIMIT %s) RETURNING ";
/* cell26: the claim's UPDATE returns nothing; one SELECT returns its rows as one text cell, each row printf's SQL
 * literals of its fields (%Q: 'text' with '' for a quote, or NULL), the rows joined by ';' (SQLiteClaimCell). */
static const char *claimCell26 =
    "SELECT group_concat(printf('%d,%Q,%d,%Q,%Q,%Q,%Q,%d,%d,%Q,%d,%Q,%Q,%Q,%Q,%Q,%Q,%Q', id, send_id, position,"
    " target, identity, provider, recipient_id, attempts, next_attempt_at, message_id, may_have_been_delivered,"
    " last_state, last_status, last_reason, last_code, last_classification, last_invalid_since, last_message_id),"
    " ';') AS cell FROM norq_outbox WHERE state = 'leased' AND lease_expires_at = ?2 AND lease_token = ?1 || '-' || id";
static const char *claimColumns24 =
    "id, send_id, position, target, identity, provider, recipient_id, attempts, next_attempt_at, message_id,"
    " may_have_been_delivered, CASE WHEN last_state IS NULL THEN NULL ELSE json_array(last_state, last_status,"
    " last_reason, last_code, last_classification, last_invalid_since, last_message_id) END";

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "stop23") && strcmp(argv[1], "stop24") && strcmp(argv[1], "stop25")
                      && strcmp(argv[1], "cell26"))) {
        fprintf(stderr, "usage: sqlite_floor stop23|stop24|stop25|cell26 ROWS DBPATH\n");
        return 2;
    }
    int cell26 = strcmp(argv[1], "cell26") == 0;
    int stop25 = cell26 || strcmp(argv[1], "stop25") == 0, stop24 = stop25 || strcmp(argv[1], "stop24") == 0;
    int count = atoi(argv[2]);
    if (S(open)(argv[3], &db) != SQLITE_OK) { fprintf(stderr, "cannot open %s\n", argv[3]); return 1; }
    if (stop25) run("PRAGMA page_size = 8192;");
    run("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    run(schema);
    char *sql = malloc(1 << 20);
    sprintf(sql, "CREATE TRIGGER norq_outbox_finished AFTER UPDATE OF %s ON norq_outbox%s",
            stop24 ? "last_state" : "state", finishedBody);
    run(sql);
    if (stop24) run("CREATE TRIGGER norq_history_moved AFTER INSERT ON norq_history BEGIN"
                    " DELETE FROM norq_outbox WHERE id = NEW.id; END");
    /* One send of `count` rows shaped like the benchmark's (a token target, a UUID message id). */
    run("BEGIN");
    sqlite3_stmt *insert;
    S(prepare_v2)(db, "INSERT INTO norq_outbox (send_id, position, target, identity, provider, recipient_id, message_id,"
                  " state, next_attempt_at) VALUES ('0193b1c2-7d4e-7000-8000-00000000abcd', ?1, ?2, ?3, 'apns', ?4, ?5,"
                  " 'pending', 0)", -1, &insert, 0);
    for (int i = 0; i < count; i++) {
        char target[160], token[80], recipient[32], message[48];
        sprintf(token, "%064d", i);
        sprintf(target, "{\"platform\":\"apns\",\"token\":\"%s\"}", token);
        sprintf(recipient, "r%d", i);
        sprintf(message, "5d41402a-bc4b-5a76-b971-%012d", i);
        S(bind_int)(insert, 1, i);
        S(bind_text)(insert, 2, target, -1, SQLITE_TRANSIENT);
        S(bind_text)(insert, 3, token, -1, SQLITE_TRANSIENT);
        S(bind_text)(insert, 4, recipient, -1, SQLITE_TRANSIENT);
        S(bind_text)(insert, 5, message, -1, SQLITE_TRANSIENT);
        if (S(step)(insert) != SQLITE_DONE) { fprintf(stderr, "insert: %s\n", S(errmsg)(db)); return 1; }
        S(reset)(insert);
    }
    S(finalize)(insert);
    run("COMMIT");

    const char *base = "6f1c3a52-9b7e-4c0d-8a21-3e5f7d9b1c24";
    long long ids[BATCH];
    double start = cpu(), claimCPU = 0;
    int done = 0;
    for (;;) {
        double claimStart = cpu();
        sqlite3_stmt *claim;
        char limit[16];
        sprintf(limit, "%d", BATCH);
        sprintf(sql, claimHead, stop25 ? limit : "?5");
        if (cell26) *strstr(sql, " RETURNING ") = 0;
        else strcat(sql, stop24 ? claimColumns24 : COLS);
        S(prepare_v3)(db, sql, -1, 0, &claim, 0);
        S(bind_text)(claim, 1, "bench-store-abcdef", -1, SQLITE_TRANSIENT);
        S(bind_text)(claim, 2, base, -1, SQLITE_TRANSIENT);
        S(bind_int64)(claim, 3, 1000000);
        S(bind_int64)(claim, 4, 1);
        if (!stop25) S(bind_int)(claim, 5, BATCH);
        int rows = 0, columns = S(column_count)(claim);
        if (cell26) {  /* the UPDATE, then the cell: each row's id leads it, rows end at ';' outside quotes */
            if (S(step)(claim) != SQLITE_DONE) { fprintf(stderr, "claim: %s\n", S(errmsg)(db)); return 1; }
            S(finalize)(claim);
            if (S(prepare_v3)(db, claimCell26, -1, 0, &claim, 0) != SQLITE_OK) { fprintf(stderr, "%s\n", S(errmsg)(db)); return 1; }
            S(bind_text)(claim, 1, base, -1, SQLITE_TRANSIENT);
            S(bind_int64)(claim, 2, 1000000);
            if (S(step)(claim) == SQLITE_ROW && S(column_type)(claim, 0) == SQLITE_TEXT) {
                const char *t = (const char *)S(column_text)(claim, 0);
                while (*t) {
                    ids[rows++] = atoll(t);
                    for (int quoted = 0; *t && (quoted || *t != ';'); t++) if (*t == '\'') quoted = !quoted;
                    if (*t) t++;
                }
            }
            columns = 0;
        }
        while (S(step)(claim) == SQLITE_ROW) {
            ids[rows++] = S(column_int64)(claim, 0);
            for (int c = 1; c < columns; c++) {  /* read every column, as SQLiteNIO does */
                if (S(column_type)(claim, c) == SQLITE_TEXT) (void)S(column_text)(claim, c);
                else (void)S(column_int64)(claim, c);
            }
        }
        S(finalize)(claim);
        claimCPU += cpu() - claimStart;
        if (rows == 0) break;
        /* The finish of the batch as delivered (id, token, message id per row). */
        char *p = sql;
        if (stop25) {
            p += sprintf(p, "WITH i(id, token, l_message) AS (SELECT CAST(key AS INTEGER),"
                         " substr(key, instr(key, ':') + 1), value FROM json_each(?10)");
        } else if (stop24) {
            p += sprintf(p, "WITH i(id, token, l_message) AS (SELECT value ->> 0, value ->> 1, value ->> 2"
                         " FROM json_each(?10)");
        } else {
            p += sprintf(p, "WITH i(id, token, at, l_message) AS (VALUES ");
            for (int k = 0; k < rows; k++)
                p += sprintf(p, "%s(?%d,?%d,?%d,?%d)", k ? "," : "", 11 + 4 * k, 12 + 4 * k, 13 + 4 * k, 14 + 4 * k);
        }
        if (stop24)
            sprintf(p, ") INSERT INTO norq_history (" COLS ", finished_at) SELECT norq_outbox.id, send_id, position,"
                    " target, identity, provider, recipient_id, ?1, attempts, next_attempt_at, NULL, NULL, NULL, message_id,"
                    " max(may_have_been_delivered, ?8), ?2, ?3, ?4, ?5, ?6, ?7, i.l_message, ?9 FROM i CROSS JOIN norq_outbox"
                    " ON norq_outbox.id = i.id WHERE norq_outbox.lease_token = i.token AND norq_outbox.state = 'leased'"
                    " RETURNING id");
        else  /* stop 23's one statement for every kind, the kind in ?1 */
            sprintf(p, ") UPDATE norq_outbox SET state = ?2,"
                    " next_attempt_at = CASE WHEN ?1 = 'retry' THEN i.at ELSE norq_outbox.next_attempt_at END,"
                    " attempts = CASE WHEN ?1 = 'release' THEN max(0, norq_outbox.attempts - 1) ELSE norq_outbox.attempts END,"
                    " lease_owner = NULL, lease_token = NULL, lease_expires_at = CASE WHEN ?1 = 'finish' THEN ?10 ELSE NULL END,"
                    " may_have_been_delivered = max(norq_outbox.may_have_been_delivered, ?9),"
                    " last_state = CASE WHEN ?1 = 'release' THEN norq_outbox.last_state ELSE ?3 END,"
                    " last_status = CASE WHEN ?1 = 'release' THEN norq_outbox.last_status ELSE ?4 END,"
                    " last_reason = CASE WHEN ?1 = 'release' THEN norq_outbox.last_reason ELSE ?5 END,"
                    " last_code = CASE WHEN ?1 = 'release' THEN norq_outbox.last_code ELSE ?6 END,"
                    " last_classification = CASE WHEN ?1 = 'release' THEN norq_outbox.last_classification ELSE ?7 END,"
                    " last_invalid_since = CASE WHEN ?1 = 'release' THEN norq_outbox.last_invalid_since ELSE ?8 END,"
                    " last_message_id = CASE WHEN ?1 = 'release' THEN norq_outbox.last_message_id ELSE i.l_message END"
                    " FROM i WHERE norq_outbox.id = i.id AND norq_outbox.lease_token = i.token"
                    " AND norq_outbox.state = 'leased' RETURNING norq_outbox.id");
        sqlite3_stmt *finish;
        if (S(prepare_v3)(db, sql, -1, 0, &finish, 0) != SQLITE_OK) { fprintf(stderr, "%s\n", S(errmsg)(db)); return 1; }
        /* The effect: stop 24 (state, last state, status, reason, code, classification, invalid-since,
         * may-have-been-delivered, now); stop 23 the same after the kind. Then the rows. */
        int e = stop24 ? 0 : 1, first = stop24 ? 10 : 11, arity = stop24 ? 3 : 4;
        if (!stop24) S(bind_text)(finish, 1, "finish", -1, SQLITE_TRANSIENT);
        S(bind_text)(finish, e + 1, "delivered", -1, SQLITE_TRANSIENT);
        S(bind_text)(finish, e + 2, "delivered", -1, SQLITE_TRANSIENT);
        S(bind_int)(finish, e + 3, 200);
        for (int n = e + 4; n <= e + 7; n++) S(bind_null)(finish, n);
        S(bind_int)(finish, e + 8, 0);
        S(bind_int64)(finish, e + 9, 5);
        char *json = sql + (1 << 19), *j = json;  /* stop 24: the rows as one JSON text */
        j += sprintf(j, stop25 ? "{" : "[");
        for (int k = 0; stop24 && k < rows; k++) {
            if (stop25)
                j += sprintf(j, "%s\"%lld:%s-%lld\":\"5d41402a-bc4b-5a76-b971-%012lld\"", k ? "," : "", ids[k], base,
                             ids[k], ids[k] - 1);
            else
                j += sprintf(j, "%s[%lld,\"%s-%lld\",\"5d41402a-bc4b-5a76-b971-%012lld\"]", k ? "," : "", ids[k], base,
                             ids[k], ids[k] - 1);
        }
        sprintf(j, stop25 ? "}" : "]");
        if (stop24) S(bind_text)(finish, 10, json, -1, SQLITE_TRANSIENT);
        for (int k = 0; !stop24 && k < rows; k++) {
            char token[64], message[48];
            int at = first + arity * k;
            sprintf(token, "%s-%lld", base, ids[k]);
            sprintf(message, "5d41402a-bc4b-5a76-b971-%012lld", ids[k] - 1);
            S(bind_int64)(finish, at, ids[k]);
            S(bind_text)(finish, at + 1, token, -1, SQLITE_TRANSIENT);
            if (!stop24) S(bind_int)(finish, at + 2, 0);
            S(bind_text)(finish, at + arity - 1, message, -1, SQLITE_TRANSIENT);
        }
        while (S(step)(finish) == SQLITE_ROW) done++;
        S(finalize)(finish);
    }
    double total = cpu() - start;
    sqlite3_stmt *left;
    S(prepare_v2)(db, "SELECT (SELECT count(*) FROM norq_outbox), (SELECT count(*) FROM norq_history)", -1, &left, 0);
    S(step)(left);
    printf("{\"mode\": \"%s\", \"rows\": %d, \"finished\": %d, \"outbox_left\": %d, \"history\": %d,"
           " \"cpu_s_per_10k\": %.4f, \"claim_cpu_s_per_10k\": %.4f}\n", argv[1], count, done,
           S(column_int)(left, 0), S(column_int)(left, 1), total / done * 1e4, claimCPU / done * 1e4);
    S(finalize)(left);
    S(close)(db);
    return 0;
}
