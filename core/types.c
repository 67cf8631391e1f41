/* types.c - the table of value types, indexed by on-disk tag. */
#include "core/types.h"

#include <string.h>

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

static const ks_type_t *const all_types[] = {
    &throttle_type,
    &counter_type,
    &hll_type,
    &bloom_type,
    &cuckoo_type,
    &cms_type,
    &topk_type,
    &tdigest_type,
    &ts_type,
    &geo_type,
    &bits_type,
    &activity_type,
};

const ks_type_t *ks_type_by_tag(unsigned tag)
{
    for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++)
        if (all_types[i]->tag == tag)
            return all_types[i];
    return NULL;
}

const ks_type_t *ks_type_by_name(const char *name)
{
    for (size_t i = 0; i < sizeof(all_types) / sizeof(all_types[0]); i++)
        if (strcmp(all_types[i]->name, name) == 0)
            return all_types[i];
    return NULL;
}
