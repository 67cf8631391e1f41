# suite_15_tls.sh - the cost of TLS: POST /throttle over HTTPS against the same
# tallyd build over plain HTTP, in the same run (issue 15: report the ratio).
#   keep-alive        wrk's connections stay open: the cost of encrypting
#                     each request and answer (AES-GCM via GnuTLS);
#   new connections   "Connection: close" on every request: a TCP and TLS
#                     handshake (ECDSA P-256, TLS 1.3) per request.
# The certificate is made here with openssl; wrk does not verify it.
set -eu
. bench/lib.sh

cert_dir=$(mktemp -d "$BENCH_TMP/tls-XXXXXX")
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -keyout "$cert_dir/key.pem" -out "$cert_dir/cert.pem" 2>/dev/null

start_tallyd --in-memory
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua)
plain_rps=$1 plain_p99=$2
set -- $(wrk_run "http://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post_close.lua)
plain_close_rps=$1
stop_tallyd

WAIT_SCHEME=https start_tallyd --in-memory --tls-cert "$cert_dir/cert.pem" --tls-key "$cert_dir/key.pem"
set -- $(wrk_run "https://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post.lua)
tls_rps=$1 tls_p99=$2
set -- $(wrk_run "https://127.0.0.1:$TALLY_PORT/throttle" bench/lua/throttle_post_close.lua)
tls_close_rps=$1
stop_tallyd
rm -rf "$cert_dir"

record "tally POST /throttle plain HTTP p99" "$plain_p99" ms
record "tally POST /throttle over TLS p99" "$tls_p99" ms
record "tally POST /throttle over TLS, keep-alive (req/s)" "$tls_rps" req/s "same over plain HTTP" "$plain_rps"
record "tally POST /throttle over TLS, new connections (req/s)" "$tls_close_rps" req/s "same over plain HTTP" "$plain_close_rps"
