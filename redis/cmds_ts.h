/*
 * cmds_ts.h - what the two files of the TS.* group share (private):
 * cmds_ts.c (the writes, TS.INFO, TS.GET, the group's rows) and
 * cmds_ts_query.c (the range queries and the queries by labels).
 */
#ifndef TALLY_REDIS_CMDS_TS_H
#define TALLY_REDIS_CMDS_TS_H

#include "cmd/err.h"
#include "cmd/ts.h"
#include "redis/redis_int.h"
#include "resp/reply.h"

/* RedisTimeSeries's argument helpers (its keywords: redis_word_is,
 * redis_word_index).  A timestamp: an integer >= 0 (string2ll's rules). */
bool ts_timestamp(const resp_arg_t *a, int64_t *out);
/* Redis's string2d: the whole argument a number, NaN refused. */
bool ts_strict_double(const resp_arg_t *a, double *out);
/* An aggregation's name as RedisTimeSeries 1.10 knows them (avg ... twa). */
bool ts_parse_agg_name(const resp_arg_t *a, ts_agg_t *out);

/* Errors: the module's arity error (the command as typed); "ERR TSDB: msg". */
void ts_wrong_arity(redis_conn_t *c, const resp_cmd_t *cmd);
void ts_tsdb_err(redis_conn_t *c, const char *msg);
/* Answers a missing key or another type as GetSeries does; true when an
 * error was answered. */
bool ts_key_error_first(redis_conn_t *c, const resp_arg_t *k);
/* An answer in the module's words for an operation's error: true when
 * answered, false to leave it to redis_answer_err. */
typedef bool (*ts_err_fn)(redis_conn_t *c, const cmd_err_t *e);
/* GetSeries's errors (NOT_FOUND, WRONGTYPE). */
bool ts_err_series(redis_conn_t *c, const cmd_err_t *e);
/* redis_run with the operation's NOT_FOUND, WRONGTYPE, EXISTS and
 * BAD_REQUEST (the codes the module words itself) offered to answer;
 * true with *res filled, false with the error answered. */
bool ts_run(redis_conn_t *c, const cmd_def_t *def, const void *args, void *res, ts_err_fn answer);

/* A value as RedisTimeSeries prints it under RESP2 (its dragonbox: the
 * shortest digits, "1.5", "1E-1", "1E16", "NaN"); out holds 40 bytes. */
size_t ts_value_text(double v, char *out);
/* The value: a simple string under RESP2, a double under RESP3. */
void ts_reply_value(resp_out_t *o, double v);
/* [timestamp, value]. */
void ts_reply_sample(resp_out_t *o, int64_t t, double v);
/* A map of n pairs under RESP3, an array of n under RESP2 (its pairs
 * then as arrays of two). */
void ts_reply_map_or_array(resp_out_t *o, size_t n);

/* cmds_ts_query.c's handlers. */
void ts_range_command(redis_conn_t *c, const resp_cmd_t *cmd);
void ts_revrange_command(redis_conn_t *c, const resp_cmd_t *cmd);
void ts_mrange_command(redis_conn_t *c, const resp_cmd_t *cmd);
void ts_mrevrange_command(redis_conn_t *c, const resp_cmd_t *cmd);
void ts_mget_command(redis_conn_t *c, const resp_cmd_t *cmd);
void ts_queryindex_command(redis_conn_t *c, const resp_cmd_t *cmd);

#endif
