/* PyTorch's TCPStore client against ctorch's server and ctorch's client against
 * PyTorch's server, through torchpy (PyTorch 2.15); skipped where torchpy is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ------------------------------------------------------------ PyTorch itself */

static bool have_torchpy(void) { return system("command -v torchpy >/dev/null 2>&1") == 0; }

/* PyTorch's client against ctorch's server. */
static void test_pytorch_client(void **state) {
    if (!have_torchpy())
        skip();
    ct_store *s = ct_store_tcp(NULL, 0, true, 10000);
    CT_ASSERT_OK(s);
    assert_int_equal(ct_store_set(s, "from_ctorch", "hello", 5), CT_OK);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "torchpy -c \"\n"
             "import datetime\n"
             "from torch.distributed import TCPStore\n"
             "c = TCPStore('127.0.0.1', %d, 2, False, timeout=datetime.timedelta(seconds=10))\n"
             "assert c.get('from_ctorch') == b'hello'\n"
             "assert c.add('count', 3) == 3\n"
             "c.set('from_python', 'hi ' + c.get('from_ctorch').decode())\n"
             "\" >/dev/null 2>&1",
             ct_store_port(s));
    assert_int_equal(system(cmd), 0);
    void *v = NULL;
    assert_int_equal(ct_store_get(s, "from_python", &v, NULL), CT_OK);
    assert_string_equal(v, "hi hello");
    free(v);
    int64_t x = 0;
    assert_int_equal(ct_store_add(s, "count", 1, &x), CT_OK);
    assert_int_equal(x, 4);
    ct_store_free(s);
}

/* ctorch's client against PyTorch's server. */
static void test_pytorch_server(void **state) {
    if (!have_torchpy())
        skip();
    FILE *p = popen("torchpy -c \"\n"
                    "import datetime, sys\n"
                    "from torch.distributed import TCPStore\n"
                    "m = TCPStore('127.0.0.1', 0, 2, True, timeout=datetime.timedelta(seconds=20), "
                    "wait_for_workers=False)\n"
                    "print(m.port, flush=True)\n"
                    "m.set('from_python', 'py')\n"
                    "m.wait(['from_ctorch'])\n"
                    "m.set('echo', m.get('from_ctorch') + b'!')\n"
                    "m.wait(['bye'])\n"
                    "\" 2>/dev/null",
                    "r");
    assert_non_null(p);
    int port = 0;
    if (fscanf(p, "%d", &port) != 1) {
        pclose(p);
        fail_msg("PyTorch's TCPStore server did not start");
    }
    ct_store *s = ct_store_tcp("127.0.0.1", port, false, 10000);
    CT_ASSERT_OK(s);
    void *v = NULL;
    assert_int_equal(ct_store_get(s, "from_python", &v, NULL), CT_OK);
    assert_string_equal(v, "py");
    free(v);
    assert_int_equal(ct_store_set(s, "from_ctorch", "c", 1), CT_OK);
    assert_int_equal(ct_store_get(s, "echo", &v, NULL), CT_OK);
    assert_string_equal(v, "c!");
    free(v);
    const char *k[] = {"never"};
    CT_ASSERT_ERR(ct_store_wait(s, k, 1, 100) == CT_OK, CT_ERROR_RUNTIME, "never");
    assert_int_equal(ct_store_set(s, "bye", "", 0), CT_OK);
    ct_store_free(s);
    assert_int_equal(pclose(p), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_client),
        cmocka_unit_test(test_pytorch_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
