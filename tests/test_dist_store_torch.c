/* PyTorch's TCPStore client against ctorch's server and ctorch's client against
 * PyTorch's server, through torchpy (PyTorch 2.15), in one Python process (its start-up
 * is most of the time); skipped where torchpy is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static bool have_torchpy(void) { return system("command -v torchpy >/dev/null 2>&1") == 0; }

static void test_pytorch_both_ways(void **state) {
    if (!have_torchpy())
        skip();
    /* ctorch's server, with a key for PyTorch's client to read. */
    ct_store *s = ct_store_tcp(NULL, 0, true, 20000);
    CT_ASSERT_OK(s);
    assert_int_equal(ct_store_set(s, "from_ctorch", "hello", 5), CT_OK);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "torchpy -c \"\n"
             "import datetime\n"
             "from torch.distributed import TCPStore\n"
             "t = datetime.timedelta(seconds=20)\n"
             "c = TCPStore('127.0.0.1', %d, 2, False, timeout=t)\n"
             "assert c.get('from_ctorch') == b'hello'\n"
             "assert c.add('count', 3) == 3\n"
             "c.set('from_python', 'hi ' + c.get('from_ctorch').decode())\n"
             "m = TCPStore('127.0.0.1', 0, 2, True, timeout=t, wait_for_workers=False)\n"
             "m.set('from_python', 'py')\n"
             "print(m.port, flush=True)\n"
             "m.wait(['from_ctorch'])\n"
             "m.set('echo', m.get('from_ctorch') + b'!')\n"
             "m.wait(['bye'])\n"
             "\" 2>/dev/null",
             ct_store_port(s));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int port = 0;
    if (fscanf(p, "%d", &port) != 1) {
        pclose(p);
        fail_msg("PyTorch's client or server failed");
    }
    /* PyTorch's client is done with ctorch's server. */
    void *v = NULL;
    assert_int_equal(ct_store_get(s, "from_python", &v, NULL), CT_OK);
    assert_string_equal(v, "hi hello");
    free(v);
    int64_t x = 0;
    assert_int_equal(ct_store_add(s, "count", 1, &x), CT_OK);
    assert_int_equal(x, 4);
    /* ctorch's client against PyTorch's server. */
    ct_store *c = ct_store_tcp("127.0.0.1", port, false, 20000);
    CT_ASSERT_OK(c);
    assert_int_equal(ct_store_get(c, "from_python", &v, NULL), CT_OK);
    assert_string_equal(v, "py");
    free(v);
    assert_int_equal(ct_store_set(c, "from_ctorch", "c", 1), CT_OK);
    assert_int_equal(ct_store_get(c, "echo", &v, NULL), CT_OK);
    assert_string_equal(v, "c!");
    free(v);
    const char *k[] = {"never"};
    CT_ASSERT_ERR(ct_store_wait(c, k, 1, 100) == CT_OK, CT_ERROR_RUNTIME, "never");
    assert_int_equal(ct_store_set(c, "bye", "", 0), CT_OK);
    ct_store_free(c);
    assert_int_equal(pclose(p), 0);
    ct_store_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_both_ways),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
