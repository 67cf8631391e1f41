/* names.c - see names.h. */
#include <stdio.h>

#include "cmd/names.h"
#include "core/activity.h"
#include "core/bits.h"
#include "core/bloom.h"
#include "core/cms.h"
#include "core/counter.h"
#include "core/cuckoo.h"
#include "core/geo.h"
#include "core/hll.h"
#include "core/tdigest.h"
#include "core/throttle.h"
#include "core/topk.h"
#include "core/ts.h"

static const struct {
    const ks_type_t *type;
    const char *noun;            /* with its article: "a Bloom filter" (WRONGTYPE messages) */
    const char *missing;         /* the refusal of a key that must exist; NULL: "no such key (create the <type>
                                    with PUT /<type>/{key})" */
} names[] = {
    { &activity_type, "an activity set", "no such key" },
    { &bits_type, "a bit string", "no such key" },
    { &bloom_type, "a Bloom filter", "no bloom filter at this key" },
    { &cms_type, "a Count-Min sketch", NULL },
    { &counter_type, "a counter", "no such key" },
    { &cuckoo_type, "a Cuckoo filter", "no cuckoo filter at this key" },
    { &geo_type, "a geo set", "no such key" },
    { &tdigest_type, "a T-Digest", NULL },
    { &throttle_type, "a rate limiter", "no such key" },
    { &topk_type, "a Top-K", NULL },
    { &ts_type, "a time series", "no such time series" },
    { &hll_type, "a HyperLogLog", "no HyperLogLog at this key" },
};

static int find(const ks_type_t *type)
{
    for (size_t i = 0; type && i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].type == type)
            return (int)i;
    return -1;
}

const char *cmd_type_noun(const ks_type_t *type)
{
    int i = find(type);
    return i >= 0 ? names[i].noun : "a value";
}

void cmd_type_missing(const ks_type_t *type, char *out, size_t n)
{
    int i = find(type);
    if (!type || (i >= 0 && names[i].missing))
        snprintf(out, n, "%s", type ? names[i].missing : "no such key");
    else
        snprintf(out, n, "no such key (create the %s with PUT /%s/{key})", type->name, type->name);
}
