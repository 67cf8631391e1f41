/*
 * ts_codec.c - the time series' snapshot encoding (ts_type: also dumps and
 * what a replica receives).
 *
 * Snapshot encoding (version 3), little-endian:
 *   u8 version | u8 policy | i64 retention_ms | u32 nlabels
 *   nlabels x (blob name | blob value)            blob = u32 length + bytes
 *   u32 nrules                                    (version 2 on; 0 in version 1)
 *   nrules x (blob dest | u8 agg | i64 bucket_ms | i64 align | f64 quantile
 *             | u8 gen | i64 since)               (gen, since: version 3 on; 1, -1 before)
 *   u8 has_source [| blob source]                 (version 2 on)
 *   u32 nchunks
 *   nchunks x (u32 count | u32 nbits | i64 first_ts | ceil(nbits/8) bytes of stream)
 * The decoder replays every stream, checking timestamps strictly increase
 * across the whole series, values are finite, padding bits are zero, and
 * the retention invariant above, then rebuilds each chunk's encoder state.
 */
#include <stdlib.h>
#include <string.h>

#include "core/codec.h"
#include "core/ts_impl.h"

#define TS_ENC_VERSION 3              /* first byte of every encoding (1: before compaction rules, 2: before rule generations; still read) */

/* ======================================================================== */
/* Keyspace type: snapshot encoding                                         */
/* ======================================================================== */

static void type_free(void *v) { ts_free(v); }
static size_t type_size(const void *v) { return ((const ts_t *)v)->mem; }

static void type_encode(const void *value, wbuf_t *out)
{
    const ts_t *ts = value;
    wbuf_put_u8(out, TS_ENC_VERSION);
    wbuf_put_u8(out, (uint8_t)ts->policy);
    wbuf_put_i64(out, ts->retention);
    wbuf_put_u32(out, (uint32_t)ts->nlabels);
    for (size_t i = 0; i < ts->nlabels; i++) {
        wbuf_put_blob(out, ts->labels[i].name, ts->labels[i].nlen);
        wbuf_put_blob(out, ts->labels[i].value, ts->labels[i].vlen);
    }
    wbuf_put_u32(out, (uint32_t)ts->nrules);
    for (size_t i = 0; i < ts->nrules; i++) {
        wbuf_put_blob(out, ts->rules[i].dest, ts->rules[i].dlen);
        wbuf_put_u8(out, (uint8_t)ts->rules[i].agg);
        wbuf_put_i64(out, ts->rules[i].bucket_ms);
        wbuf_put_i64(out, ts->rules[i].align);
        wbuf_put_f64(out, ts->rules[i].quantile);
        wbuf_put_u8(out, ts->rules[i].gen);
        wbuf_put_i64(out, ts->rules[i].since);
    }
    wbuf_put_u8(out, ts->src != NULL);
    if (ts->src)
        wbuf_put_blob(out, ts->src, ts->src_len);
    wbuf_put_u32(out, (uint32_t)ts->nchunks);
    for (size_t i = 0; i < ts->nchunks; i++) {
        const ts_chunk_t *c = ts->chunks[i];
        wbuf_put_u32(out, c->count);
        wbuf_put_u32(out, c->nbits);
        wbuf_put_i64(out, c->first_ts);
        wbuf_put_bytes(out, c->data, (c->nbits + 7) / 8);
    }
}

static void *type_decode(const uint8_t *p, size_t len, const char **why)
{
    rbuf_t r = rbuf_make(p, len);
    uint8_t ver = rbuf_u8(&r);
    uint8_t policy = rbuf_u8(&r);
    int64_t retention = rbuf_i64(&r);
    uint32_t nlabels = rbuf_u32(&r);
    if (r.err) {
        *why = "ts: truncated header";
        return NULL;
    }
    if (ver < 1 || ver > TS_ENC_VERSION) {
        *why = "ts: unknown encoding version";
        return NULL;
    }
    if (policy >= TS_DUP__COUNT || retention < 0) {
        *why = "ts: bad policy or retention";
        return NULL;
    }
    if (nlabels > TS_MAX_LABELS) {
        *why = "ts: too many labels";
        return NULL;
    }
    ts_label_t lab[TS_MAX_LABELS];
    for (uint32_t i = 0; i < nlabels; i++) {
        size_t nl, vl;
        const uint8_t *np = rbuf_blob(&r, &nl);
        const uint8_t *vp = rbuf_blob(&r, &vl);
        if (!np || !vp || nl == 0 || vl == 0 || nl > TS_MAX_LABEL_LEN || vl > TS_MAX_LABEL_LEN || !codec_text_ok(np, nl) ||
            !codec_text_ok(vp, vl)) {
            *why = "ts: bad label";
            return NULL;
        }
        for (uint32_t k = 0; k < i; k++)
            if (lab[k].name_len == nl && memcmp(lab[k].name, np, nl) == 0) {
                *why = "ts: duplicate label";
                return NULL;
            }
        lab[i] = (ts_label_t){ (const char *)np, nl, (const char *)vp, vl };
    }
    ts_rule_t rules[TS_MAX_RULES];
    uint32_t nrules = 0;
    const uint8_t *srcp = NULL;
    size_t srcl = 0;
    if (ver >= 2) {
        nrules = rbuf_u32(&r);
        if (r.err || nrules > TS_MAX_RULES) {
            *why = "ts: bad rule count";
            return NULL;
        }
        for (uint32_t i = 0; i < nrules; i++) {
            size_t dl;
            const uint8_t *dp = rbuf_blob(&r, &dl);
            uint8_t agg = rbuf_u8(&r);
            int64_t bucket = rbuf_i64(&r), align = rbuf_i64(&r);
            double quant = rbuf_f64(&r);
            uint8_t gen = TS_RULE_GEN_1;   /* (version 2: before issue 37) */
            int64_t since = -1;
            if (ver >= 3) {
                gen = rbuf_u8(&r);
                since = rbuf_i64(&r);
            }
            if (r.err || !dp || dl == 0 || dl > TS_MAX_LABEL_LEN * 64 || agg == TS_AGG_NONE || agg >= TS_AGG__COUNT ||
                bucket <= 0 || align < 0 || !(quant >= 0 && quant <= 1) || (agg != TS_AGG_QUANTILE && quant != 0) ||
                (gen != TS_RULE_GEN_1 && gen != TS_RULE_GEN_2) || since < -1 || (gen == TS_RULE_GEN_1 && since != -1)) {
                *why = "ts: bad rule";
                return NULL;
            }
            rules[i] = (ts_rule_t){ (const char *)dp, dl, (ts_agg_t)agg, bucket, align, quant, gen, since };
        }
        uint8_t has_src = rbuf_u8(&r);
        if (has_src > 1 || (has_src && (!(srcp = rbuf_blob(&r, &srcl)) || srcl == 0))) {
            *why = "ts: bad source";
            return NULL;
        }
    }
    uint32_t nchunks = rbuf_u32(&r);
    if (r.err || (uint64_t)nchunks * 17 > rbuf_left(&r)) {   /* each chunk takes >= 16 + 1 bytes */
        *why = "ts: bad chunk count";
        return NULL;
    }
    ts_t *ts = ts_create(retention, (ts_policy_t)policy, lab, nlabels);
    bool ok = ts && (!nchunks || tsi_ensure_array(ts, nchunks)) && (!srcp || ts_set_source(ts, (const char *)srcp, srcl));
    for (uint32_t i = 0; ok && i < nrules; i++)
        ok = ts_rule_add(ts, &rules[i]);
    if (!ok) {
        ts_free(ts);
        *why = "out of memory";
        return NULL;
    }
    for (uint32_t i = 0; i < nchunks; i++) {
        uint32_t count = rbuf_u32(&r);
        uint32_t nbits = rbuf_u32(&r);
        int64_t first = rbuf_i64(&r);
        if (r.err || count == 0 || count > TS_CHUNK_MAX_SAMPLES || nbits < 64 ||
            nbits > (uint32_t)TS_CHUNK_CAP_MAX * 8 || first < 0) {
            *why = "ts: bad chunk header";
            goto fail;
        }
        uint32_t nbytes = (nbits + 7) / 8;
        const uint8_t *d = rbuf_bytes(&r, nbytes);
        if (!d) {
            *why = "ts: truncated chunk";
            goto fail;
        }
        if ((nbits & 7) && (d[nbytes - 1] & (0xff >> (nbits & 7)))) {
            *why = "ts: nonzero padding bits";
            goto fail;
        }
        gorilla_enc_t g;
        if (!gorilla_decode(d, nbits, count, first, TS_MAX_TIMESTAMP, NULL, NULL, &g)) {
            *why = "ts: corrupt chunk stream";
            goto fail;
        }
        if (i > 0 && first <= ts->chunks[i - 1]->last_ts) {
            *why = "ts: chunks out of order";
            goto fail;
        }
        ts_chunk_t *c = tsi_chunk_new(ts, nbytes);
        if (!c) {
            *why = "out of memory";
            goto fail;
        }
        memcpy(c->data, d, nbytes);
        chunk_set_enc(c, &g);
        ts->chunks[ts->nchunks++] = c;
        ts->total += count;
    }
    if (!rbuf_done(&r)) {
        *why = "ts: trailing bytes";
        goto fail;
    }
    if (ts->nchunks) {
        int64_t cut = cutoff(ts);
        for (size_t i = 0; i < ts->nchunks; i++)
            if ((i > 0 && ts->chunks[i]->first_ts < cut) || ts->chunks[i]->last_ts < cut) {
                *why = "ts: samples past retention beyond the first chunk";
                goto fail;
            }
    }
    return ts;
fail:
    ts_free(ts);
    return NULL;
}

const ks_type_t ts_type = {
    .tag = TYPE_TAG_TS,
    .name = "ts",
    .noun = "a time series",
    .missing = "no such time series",
    .free = type_free,
    .size = type_size,
    .encode = type_encode,
    .decode = type_decode,
};
