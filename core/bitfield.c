/* bitfield.c - see bitfield.h. */
#include "core/bitfield.h"

/* ------------------------------------------------------------------------ */
/* Fields as big-endian integers at bit offsets                             */
/* ------------------------------------------------------------------------ */

#define BF_WINDOW 9   /* bytes that hold any 64-bit field at any bit offset */

static inline uint64_t width_mask(unsigned w) { return w == 64 ? UINT64_MAX : ((uint64_t)1 << w) - 1; }

/* The 9 bytes from `byte` as one 72-bit big-endian number (zeros past len). */
static unsigned __int128 window_load(const uint8_t *p, size_t len, uint64_t byte)
{
    unsigned __int128 acc = 0;
    for (uint64_t i = 0; i < BF_WINDOW; i++)
        acc = acc << 8 | (byte + i < len ? p[byte + i] : 0);
    return acc;
}

static uint64_t field_get(const uint8_t *p, size_t len, uint64_t offset, unsigned w)
{
    unsigned shift = 8 * BF_WINDOW - (unsigned)(offset & 7) - w;
    return (uint64_t)(window_load(p, len, offset >> 3) >> shift) & width_mask(w);
}

/* Stores the low w bits of v; every byte the field touches is < len. */
static void field_set(uint8_t *p, size_t len, uint64_t offset, unsigned w, uint64_t v)
{
    uint64_t byte = offset >> 3;
    unsigned shift = 8 * BF_WINDOW - (unsigned)(offset & 7) - w;
    unsigned __int128 m = (unsigned __int128)width_mask(w) << shift;
    unsigned __int128 acc = window_load(p, len, byte);
    acc = (acc & ~m) | ((unsigned __int128)(v & width_mask(w)) << shift);
    for (int i = BF_WINDOW - 1; i >= 0; i--, acc >>= 8)
        if (byte + (uint64_t)i < len)
            p[byte + (uint64_t)i] = (uint8_t)acc;
}

static int64_t sign_extend(uint64_t v, unsigned w)
{
    if (w < 64 && (v & ((uint64_t)1 << (w - 1))))
        v |= UINT64_MAX << w;
    return (int64_t)v;
}

/* ------------------------------------------------------------------------ */
/* Overflow (Redis's rules, with its wrapping 64-bit arithmetic)            */
/* ------------------------------------------------------------------------ */

int bf_check_unsigned(uint64_t value, int64_t incr, unsigned width, bf_overflow_t ow, uint64_t *limit)
{
    uint64_t max = width_mask(width);
    int64_t maxincr = (int64_t)(max - value);
    int64_t minincr = (int64_t)(0 - value);
    int r;
    if (value > max || (incr > 0 && incr > maxincr))
        r = 1;
    else if (incr < 0 && incr < minincr)
        r = -1;
    else
        return 0;
    if (ow == BF_SAT)
        *limit = r > 0 ? max : 0;
    else if (ow == BF_WRAP)
        *limit = (value + (uint64_t)incr) & max;
    return r;
}

int bf_check_signed(int64_t value, int64_t incr, unsigned width, bf_overflow_t ow, int64_t *limit)
{
    int64_t max = width == 64 ? INT64_MAX : (int64_t)(((uint64_t)1 << (width - 1)) - 1);
    int64_t min = -max - 1;
    /* Redis computes these differences before knowing they fit; done in
     * unsigned arithmetic they wrap, which decides some corner cases */
    int64_t maxincr = (int64_t)((uint64_t)max - (uint64_t)value);
    int64_t minincr = (int64_t)((uint64_t)min - (uint64_t)value);
    int r;
    if (value > max || (width != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr))
        r = 1;
    else if (value < min || (width != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr))
        r = -1;
    else
        return 0;
    if (ow == BF_SAT) {
        *limit = r > 0 ? max : min;
    } else if (ow == BF_WRAP) {
        uint64_t c = (uint64_t)value + (uint64_t)incr;
        *limit = sign_extend(c & width_mask(width), width);
    }
    return r;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                 */
/* ------------------------------------------------------------------------ */

bool bf_parse_type(const char *s, size_t len, bool *sign, uint8_t *width)
{
    if (len < 2 || len > 3 || (s[0] != 'i' && s[0] != 'u'))
        return false;
    unsigned w = 0;
    for (size_t i = 1; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        w = w * 10 + (unsigned)(s[i] - '0');
    }
    if (s[1] == '0')
        return false;   /* no leading zeros (and no width 0) */
    bool sg = s[0] == 'i';
    if (w < 1 || w > (sg ? 64u : 63u))
        return false;
    *sign = sg;
    *width = (uint8_t)w;
    return true;
}

uint64_t bf_needed_len(const bf_op_t *ops, size_t n)
{
    uint64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].opcode == BF_GET)
            continue;
        uint64_t len = ((ops[i].offset + ops[i].width - 1) >> 3) + 1;
        if (len > need)
            need = len;
    }
    return need;
}

void bf_exec(uint8_t *p, size_t len, const bf_op_t *ops, size_t n, bf_result_t *out, bool *changed)
{
    *changed = false;
    for (size_t i = 0; i < n; i++) {
        const bf_op_t *op = &ops[i];
        unsigned w = op->width;
        uint64_t raw = field_get(p, len, op->offset, w);
        out[i].nil = false;
        if (op->opcode == BF_GET) {
            out[i].value = op->sign ? sign_extend(raw, w) : (int64_t)raw;
            continue;
        }
        uint64_t store;
        int overflow;
        if (op->sign) {
            int64_t oldv = sign_extend(raw, w), newv, lim = 0;
            if (op->opcode == BF_INCRBY) {
                overflow = bf_check_signed(oldv, op->arg, w, (bf_overflow_t)op->overflow, &lim);
                newv = overflow ? lim : oldv + op->arg;
                out[i].value = newv;
            } else {
                overflow = bf_check_signed(op->arg, 0, w, (bf_overflow_t)op->overflow, &lim);
                newv = overflow ? lim : op->arg;
                out[i].value = oldv;
            }
            store = (uint64_t)newv & width_mask(w);
        } else {
            uint64_t oldv = raw, newv, lim = 0;
            if (op->opcode == BF_INCRBY) {
                overflow = bf_check_unsigned(oldv, op->arg, w, (bf_overflow_t)op->overflow, &lim);
                newv = overflow ? lim : oldv + (uint64_t)op->arg;
                out[i].value = (int64_t)newv;
            } else {
                overflow = bf_check_unsigned((uint64_t)op->arg, 0, w, (bf_overflow_t)op->overflow, &lim);
                newv = overflow ? lim : (uint64_t)op->arg;
                out[i].value = (int64_t)oldv;
            }
            store = newv & width_mask(w);
        }
        if (overflow && op->overflow == BF_FAIL) {
            out[i].nil = true;
            out[i].value = 0;
            continue;
        }
        if (store != raw) {
            field_set(p, len, op->offset, w, store);
            *changed = true;
        }
    }
}
