/* it_redis_ref_smoke.c - the Redis reference used by differential tests
 * starts and answers (and the seeds' BITFIELD transcript holds there). */
#include <string.h>

#include "tests/integration/harness.h"
#include "tests/integration/redis_ref.h"

static void test_redis_answers(void **state)
{
    (void)state;
    redis_ref_t r;
    if (!redis_ref_start(&r))
        skip();
    resp_t *v = redis_cmd(&r, "SET", "w", "hello", NULL);
    assert_int_equal(v->kind, RESP_STRING);
    resp_free(v);
    v = redis_cmd(&r, "BITFIELD", "w", "GET", "u4", "0", NULL);
    assert_int_equal(v->kind, RESP_ARRAY);
    assert_int_equal(v->elems[0]->integer, 6);
    resp_free(v);
    v = redis_cmd(&r, "GET", "nokey", NULL);
    assert_int_equal(v->kind, RESP_NIL);
    resp_free(v);
    redis_ref_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_redis_answers) };
    return cmocka_run_group_tests_name("redis reference", tests, NULL, NULL);
}
