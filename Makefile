# tally - build, run, install, test and benchmark tallyd.
#
#   make / all     build build/release/tallyd
#   make run       build dependencies + build + start tallyd on 127.0.0.1:8080 (Redis protocol on 6380), data in ./data
#   make install   install tallyd, its man page and systemd unit under PREFIX (default
#                  /usr/local; DESTDIR for staging); make uninstall removes them
#   make test      test dependencies + every test, twice: optimised, then under ASan+UBSan;
#                  then the multi-threaded integration tests under TSan
#   make bench     bench dependencies + benchmarks against Redis and a bare libmicrohttpd server
#   make fuzz      run each libFuzzer target for FUZZ_SECONDS (clang)
#   make valgrind  the unit tests under valgrind (leaks and invalid accesses are errors)
#   make docs      openapi.yaml rendered into a browsable page, build/docs/api.html
#   make charts    the benchmark charts (docs/img/*.svg) drawn again from the last make bench
#   make SANITIZER=address,undefined test    only the sanitizer run
#   make SANITIZER=thread tsan-suite         the ThreadSanitizer run alone
#
# Dependencies come in sets (tools/deps.sh): `make deps` installs what
# building needs and nothing else (run and install call it); `make deps-test`,
# `deps-bench` and `deps-fuzz` add what those targets need (test, bench and
# fuzz call them).  Only the test set uses npm.  As root the missing Debian
# packages are installed; otherwise the exact apt-get command is printed.
#
# Build products go to build/release, build/sanitize or build/tsan; sources are found by
# wildcard, so a new core/ api/ service/ file or test needs no edit here.

SANITIZER ?=
CC ?= cc
ifeq ($(strip $(SANITIZER)),)
  BUILD := build/release
  OPTFLAGS := -O2
else ifeq ($(strip $(SANITIZER)),thread)
  BUILD := build/tsan
  OPTFLAGS := -O1 -fno-omit-frame-pointer -fsanitize=thread
else
  BUILD := build/sanitize
  OPTFLAGS := -O1 -fno-omit-frame-pointer -fsanitize=$(SANITIZER) -fno-sanitize-recover=all
  # debug checks: keyspace entry points assert that the caller holds the shard lock
  DEBUGFLAGS := -DTALLY_DEBUG_LOCKS
endif

WARNINGS := -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror
# The registries (tools/registry.sh): generated lists of every value type,
# operation and route family, shared by every build.
GEN := build/gen
CFLAGS := -std=c11 -D_GNU_SOURCE -g $(OPTFLAGS) $(DEBUGFLAGS) $(WARNINGS) -pthread -I. -I$(GEN) -MMD -MP
LDFLAGS := $(OPTFLAGS) -pthread
# core/ links against these and nothing else (checked by $(CORE_PURE)).
CORE_LIBS := -lroaring -lxxhash -lz -lm
# GLib's GTimeZone reads tzdata for calendar windows: only cmd/zone.c includes it.
GLIB_CFLAGS := $(shell pkg-config --cflags glib-2.0)
GLIB_LIBS := $(shell pkg-config --libs glib-2.0)
BASE_LIBS := -lmicrohttpd -lgnutls -ljansson -lnettle -lcurl -lyaml -lnghttp2 -lprotobuf-c $(GLIB_LIBS) $(CORE_LIBS)
LIBS := $(BASE_LIBS)
# jemalloc serves the many small per-request allocations (jansson, MHD) ~12%
# faster than glibc's malloc on /throttle; sanitizer builds keep their own
# allocator.
ifeq ($(strip $(SANITIZER)),)
  LIBS += -ljemalloc
endif
TEST_LIBS := -lcmocka -lcurl

CORE_SRC := $(wildcard core/*.c)
CMD_SRC := $(wildcard cmd/*.c)
RESP_SRC := $(wildcard resp/*.c)
API_SRC := $(wildcard api/*.c)
# The Redis protocol's front-end (redis/: argv -> typed arguments -> cmd_call -> reply),
# beside the HTTP adapter (api/); its bytes are resp/'s.
REDIS_SRC := $(wildcard redis/*.c)
# Envoy's rate limit service, protocol-neutral (rls/: envoyproxy/ratelimit's
# YAML with libyaml, matching, the decision as one THROTTLE.BATCH).
RLS_SRC := $(wildcard rls/*.c)
# Envoy's rate limit service over gRPC: grpc/ translates its messages (generated
# by protoc-c from proto/ into $(GEN), at build time) to and from rls/'s types;
# service/grpc_server.c holds the HTTP/2 listener.
GRPC_SRC := $(wildcard grpc/*.c)
PROTO_SRC := $(shell find proto -name '*.proto' | LC_ALL=C sort)
PB_SRC := $(patsubst proto/%.proto,build/gen/%.pb-c.c,$(PROTO_SRC))
# tallyd's program: main.c and the files that share its state (service/app.h);
# the rest of service/ goes into libtally, which the tests link.
TALLYD_SRC := service/main.c $(wildcard service/app_*.c)
SVC_SRC := $(filter-out $(TALLYD_SRC),$(wildcard service/*.c))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
# Unit tests of api/ (in-process: router, readers, envelope, replay); of the
# command layer, linked with core only (test_cmd*); every other unit test is
# of core/ and links only core.
API_UNIT_SRC := $(wildcard tests/unit/test_api*.c)
CMD_UNIT_SRC := $(wildcard tests/unit/test_cmd*.c)
# Unit tests of the Redis protocol's bytes (test_resp*), linked with resp/ alone.
RESP_UNIT_SRC := $(wildcard tests/unit/test_resp*.c)
# Unit tests of rls/ (test_rls*), linked with rls/, cmd and core.
RLS_UNIT_SRC := $(wildcard tests/unit/test_rls*.c)
IT_SRC := $(wildcard tests/integration/it_*.c)
IT_LIB_SRC := $(filter-out $(IT_SRC),$(wildcard tests/integration/*.c))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRC := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
CORE_OBJ := $(call obj,$(CORE_SRC))
CMD_OBJ := $(call obj,$(CMD_SRC))
RESP_OBJ := $(call obj,$(RESP_SRC))
API_OBJ := $(call obj,$(API_SRC))
REDIS_OBJ := $(call obj,$(REDIS_SRC))
RLS_OBJ := $(call obj,$(RLS_SRC))
GRPC_OBJ := $(call obj,$(GRPC_SRC))
PB_OBJ := $(call obj,$(PB_SRC))
SVC_OBJ := $(call obj,$(SVC_SRC))
LIBCORE := $(BUILD)/libtallycore.a
LIBCMD := $(BUILD)/libtallycmd.a
LIBRESP := $(BUILD)/libtallyresp.a
LIBTALLY := $(BUILD)/libtally.a
CORE_PURE := $(BUILD)/core-pure
CMD_PURE := $(BUILD)/cmd-pure
RESP_PURE := $(BUILD)/resp-pure
TALLYD := $(BUILD)/tallyd
RESHARD := $(BUILD)/tally-reshard
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
API_UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(API_UNIT_SRC))
CMD_UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(CMD_UNIT_SRC))
RESP_UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(RESP_UNIT_SRC))
RLS_UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(RLS_UNIT_SRC))
IT_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(IT_SRC))
IT_LIB_OBJ := $(call obj,$(IT_LIB_SRC))
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/tests/fuzz/%,$(FUZZ_SRC))
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

DATA_DIR ?= ./data
PORT ?= 8080
RESP_PORT ?= 6380

.PHONY: dockerfile-check all deps deps-test deps-bench deps-fuzz run install uninstall test test-suite tsan-suite unit integration \
        valgrind deps-valgrind openapi-check openapi-lint lint-yaml monitoring-check man-check config-check install-check \
        examples-check links-check charts-check api-page layers-check fuzz-regress bench charts docs fuzz clean

all: $(TALLYD) $(RESHARD)

deps:
	@sh tools/deps.sh build
deps-test: deps
	@sh tools/deps.sh test
deps-bench: deps
	@sh tools/deps.sh bench
deps-fuzz: deps
	@sh tools/deps.sh fuzz
deps-valgrind: deps
	@sh tools/deps.sh valgrind

run: deps
	@$(MAKE) --no-print-directory all
	mkdir -p $(DATA_DIR)
	exec $(TALLYD) --port $(PORT) --resp-port $(RESP_PORT) --data-dir $(DATA_DIR)

# -------------------------------------------------------------- install --
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/tally
UNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL ?= install
# What `make install` puts where (uninstall removes exactly these): the
# README with the docs/ pages and charts it links to.
DOC_PAGES := $(wildcard docs/*.md docs/img/*.svg)
INSTALLED := $(BINDIR)/tallyd $(BINDIR)/tally-reshard $(MANDIR)/man8/tallyd.8 $(UNITDIR)/tallyd.service \
             $(DOCDIR)/README.md $(addprefix $(DOCDIR)/,$(DOC_PAGES)) $(DOCDIR)/openapi.yaml $(DOCDIR)/examples/policies.json \
             $(DOCDIR)/monitoring/grafana-dashboard.json $(DOCDIR)/monitoring/alerts.yml

install: deps
	@$(MAKE) --no-print-directory all
	$(INSTALL) -D -m 0755 $(TALLYD) $(DESTDIR)$(BINDIR)/tallyd
	$(INSTALL) -D -m 0755 $(RESHARD) $(DESTDIR)$(BINDIR)/tally-reshard
	$(INSTALL) -D -m 0644 man/tallyd.8 $(DESTDIR)$(MANDIR)/man8/tallyd.8
	@mkdir -p $(DESTDIR)$(UNITDIR)
	sed 's|/usr/local/bin/tallyd|$(BINDIR)/tallyd|' deploy/systemd/tallyd.service > $(DESTDIR)$(UNITDIR)/tallyd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/tallyd.service
	$(INSTALL) -D -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	@set -e; for f in $(DOC_PAGES); do $(INSTALL) -D -m 0644 $$f $(DESTDIR)$(DOCDIR)/$$f; done
	$(INSTALL) -D -m 0644 openapi.yaml $(DESTDIR)$(DOCDIR)/openapi.yaml
	$(INSTALL) -D -m 0644 deploy/gateways/policies.json $(DESTDIR)$(DOCDIR)/examples/policies.json
	$(INSTALL) -D -m 0644 deploy/monitoring/grafana-dashboard.json $(DESTDIR)$(DOCDIR)/monitoring/grafana-dashboard.json
	$(INSTALL) -D -m 0644 deploy/monitoring/alerts.yml $(DESTDIR)$(DOCDIR)/monitoring/alerts.yml
	@echo "installed $(DESTDIR)$(BINDIR)/tallyd; as a service: systemctl daemon-reload && systemctl enable --now tallyd"

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(DOCDIR)/docs/img $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)/monitoring \
	  $(DESTDIR)$(DOCDIR) 2>/dev/null

# ---------------------------------------------------------------- build --
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The lists of every value type, operation and route family, built from
# their definitions (tools/registry.sh says how each is found): a new type
# or family is added by its own files.  A list is rewritten only when it
# changes, so only the file that includes it is rebuilt.
REGISTRIES := $(GEN)/core_types.inc $(GEN)/cmd_defs.inc $(GEN)/api_families.inc $(GEN)/redis_groups.inc
$(GEN)/core_types.inc: $(CORE_SRC) tools/registry.sh
	@mkdir -p $(GEN)
	@sh tools/registry.sh types $(CORE_SRC) > $@.tmp && { cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@; }
$(GEN)/cmd_defs.inc: $(CMD_SRC) tools/registry.sh
	@mkdir -p $(GEN)
	@sh tools/registry.sh commands $(CMD_SRC) > $@.tmp && { cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@; }
$(GEN)/api_families.inc: $(API_SRC) tools/registry.sh
	@mkdir -p $(GEN)
	@sh tools/registry.sh families $(API_SRC) > $@.tmp && { cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@; }
$(BUILD)/core/types.o: $(GEN)/core_types.inc
$(BUILD)/cmd/table.o: $(GEN)/cmd_defs.inc
$(BUILD)/api/routes.o: $(GEN)/api_families.inc
$(GEN)/redis_groups.inc: $(REDIS_SRC) tools/registry.sh
	@mkdir -p $(GEN)
	@sh tools/registry.sh redis $(REDIS_SRC) > $@.tmp && { cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@; }
$(BUILD)/redis/table.o: $(GEN)/redis_groups.inc

# The protobuf messages (proto/ -> $(GEN)/**/*.pb-c.[ch], protoc-c from
# Debian's protobuf-c-compiler), all at once; what includes them waits.
PB_STAMP := $(GEN)/proto.stamp
$(PB_STAMP): $(PROTO_SRC)
	@mkdir -p $(GEN)
	protoc-c -Iproto --c_out=$(GEN) $(PROTO_SRC)
	@touch $@
$(PB_SRC): $(PB_STAMP) ;
$(GRPC_OBJ) $(PB_OBJ) $(BUILD)/service/grpc_server.o $(BUILD)/service/main.o $(BUILD)/tests/fuzz/fuzz_grpc.o: $(PB_STAMP)

# core/ is a library of its own.  CORE_PURE links every one of its objects
# (--whole-archive) with nothing but CORE_LIBS: the linker proves that core
# calls no I/O library (no jansson, no libmicrohttpd, no service code).
$(LIBCORE): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(CORE_PURE): $(LIBCORE)
	printf 'int main(void) { return 0; }\n' | $(CC) $(LDFLAGS) -x c -o $@ - -x none -Wl,--whole-archive $(LIBCORE) -Wl,--no-whole-archive \
	  $(CORE_LIBS) -pthread

# The command layer (cmd/) is a library of its own too: CMD_PURE links every
# one of its objects with core and CMD_LIBS only, so the linker proves the
# layer every protocol shares holds no jansson, no libmicrohttpd, no libcurl
# and no sockets of a front-end (GLib: cmd/zone.c's time zones, read from tzdata).
CMD_LIBS := -lnettle $(GLIB_LIBS) $(CORE_LIBS)
$(BUILD)/cmd/zone.o $(BUILD)/tests/unit/test_cmd_zone.o: CFLAGS += $(GLIB_CFLAGS)
$(LIBCMD): $(CMD_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(CMD_PURE): $(LIBCMD) $(LIBCORE)
	printf 'int main(void) { return 0; }\n' | $(CC) $(LDFLAGS) -x c -o $@ - -x none -Wl,--whole-archive $(LIBCMD) -Wl,--no-whole-archive \
	  $(LIBCORE) $(CMD_LIBS) -pthread

# The Redis protocol's bytes (resp/: request parser, reply encoder) are a
# library of their own: RESP_PURE links every one of its objects with the C
# library alone, and the symbols it takes from the C library must be in
# RESP_LIBC (memory, strings, formatting), so the linker proves the layer
# holds no jansson, libmicrohttpd, command layer or core, and no socket,
# file or thread call: the listener (service/) brings the I/O.
RESP_LIBC := malloc calloc realloc free memchr memcpy memmove memset strlen snprintf
$(LIBRESP): $(RESP_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(RESP_PURE): $(LIBRESP)
	printf 'int main(void) { return 0; }\n' | $(CC) $(LDFLAGS) -x c -o $@ - -x none -Wl,--whole-archive $(LIBRESP) -Wl,--no-whole-archive
	@bad=$$(nm -u $(LIBRESP) | awk '$$1 == "U" { print $$2 }' | grep -v -E '^(__(asan|ubsan|tsan|sanitizer)_|_GLOBAL_OFFSET_TABLE_$$)' | \
	  grep -v -x -F $(addprefix -e ,$(RESP_LIBC)) | sort -u); \
	  if [ -n "$$bad" ]; then echo "resp-pure: resp/ calls outside its list (RESP_LIBC): $$bad"; rm -f $@; exit 1; fi

$(LIBTALLY): $(API_OBJ) $(REDIS_OBJ) $(RLS_OBJ) $(GRPC_OBJ) $(PB_OBJ) $(SVC_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(TALLYD): $(call obj,$(TALLYD_SRC)) $(LIBTALLY) $(LIBCMD) $(LIBRESP) $(LIBCORE) | $(CORE_PURE) $(CMD_PURE) $(RESP_PURE)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(API_UNIT_BIN): $(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBTALLY) $(LIBCMD) $(LIBRESP) $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(TEST_LIBS)

$(CMD_UNIT_BIN): $(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBCMD) $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMD_LIBS) -lcmocka

$(RESP_UNIT_BIN): $(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBRESP)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

$(RLS_UNIT_BIN): $(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(RLS_OBJ) $(LIBCMD) $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ $(CMD_LIBS) -lyaml -lcmocka

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ $(CORE_LIBS) -lcmocka

# The etcd client (service/etcd.c) depends on libcurl and jansson alone; its
# test starts a real etcd.
$(BUILD)/tests/unit/test_etcd: $(BUILD)/tests/unit/test_etcd.o $(BUILD)/service/etcd.o
	$(CC) $(LDFLAGS) -o $@ $^ -lcurl -ljansson -lcmocka

$(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(IT_LIB_OBJ) $(LIBTALLY) $(LIBCMD) $(LIBRESP) $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) $(TEST_LIBS)

# Fuzz targets built with the normal compiler and a file-replaying main(), so
# `make test` runs every saved input (corpus and past crashes) as a regression.
$(BUILD)/tests/fuzz/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay_main.o $(LIBTALLY) $(LIBCMD) $(LIBRESP) $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/fuzz/replay_main.o: tests/fuzz/replay_main.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# service/ builds no HTTP answer: replication's and persistence's files hand
# typed results (cmd/repl.h, cmd/persist.h) to api/, and include neither
# jansson nor libmicrohttpd nor an api/ header, even through another header.
# The HTTP front-end's host (main.c with its app_*.c, server.c, server_conn.c)
# does, and so does persist_replay.c, which replays the HTTP requests older
# journals hold.
SVC_NO_HTTP := $(filter-out service/persist_replay.c,$(wildcard service/repl*.c service/persist*.c))
layers-check:
	@for f in $(SVC_NO_HTTP); do \
	  if $(CC) -std=c11 -D_GNU_SOURCE -I. -M $$f | tr ' \\' '\n\n' | grep -E '(^|/)(jansson|microhttpd)\.h$$|^api/'; then \
	    echo "layers-check: $$f includes the HTTP front-end (above)"; exit 1; \
	  fi; \
	done; echo "layers-check: $(words $(SVC_NO_HTTP)) files of service/ hold no HTTP"

# The container image builds tallyd from the directories its Dockerfile
# copies: every directory a source of tallyd lives in must be one of them
# (no Docker here to build the image itself).
DAEMON_DIRS := $(sort $(foreach f,$(CORE_SRC) $(CMD_SRC) $(RESP_SRC) $(API_SRC) $(REDIS_SRC) $(RLS_SRC) $(GRPC_SRC) \
                 $(PROTO_SRC) $(SVC_SRC),$(firstword $(subst /, ,$(f)))))
dockerfile-check:
	@for d in $(DAEMON_DIRS) tools/registry.sh; do \
	  grep -q "^COPY $$d $$d$$" Dockerfile || { echo "dockerfile-check: the Dockerfile does not copy $$d (tallyd is built from it)"; exit 1; }; \
	done; echo "dockerfile-check: the Dockerfile copies all $(words $(DAEMON_DIRS)) source directories of tallyd"

# The resharding tool (deploy/cluster/README.md): a client of the cluster's
# nodes, core's map parser, HAProxy's runtime map update (service/haproxy.c),
# etcd's client (service/etcd.c: --coordinator) and libcurl.
$(RESHARD): $(BUILD)/tools/reshard/tally_reshard.o $(BUILD)/service/haproxy.o $(BUILD)/service/file.o \
            $(BUILD)/service/etcd.o $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ -lcurl -ljansson $(CORE_LIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBTALLY) $(LIBCMD) $(LIBRESP) $(LIBCORE)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# The request parser against hiredis's reader (make deps-bench installs
# libhiredis-dev; nothing else links hiredis).
$(BUILD)/bench/resp_micro: $(BUILD)/bench/resp_micro.o $(LIBRESP)
	$(CC) $(LDFLAGS) -o $@ $^ -lhiredis

# ----------------------------------------------------------------- test --
ifeq ($(strip $(SANITIZER)),)
test: deps-test
	@$(MAKE) --no-print-directory test-suite
	@$(MAKE) --no-print-directory SANITIZER=address,undefined test-suite
	@$(MAKE) --no-print-directory SANITIZER=thread tsan-suite
	@echo "make test: all passed (optimised, ASan+UBSan and ThreadSanitizer builds)"
else
test: deps-test
	@$(MAKE) --no-print-directory test-suite
endif

# The checks of files (OpenAPI, YAML, monitoring, man page, install, the
# docs' examples) do not depend on the build flavour: they run once, in the
# optimised pass.
ifeq ($(strip $(SANITIZER)),)
test-suite: all unit integration fuzz-regress openapi-check openapi-lint lint-yaml monitoring-check man-check \
            config-check install-check examples-check links-check charts-check api-page layers-check dockerfile-check
else
test-suite: all unit integration fuzz-regress
endif

# ThreadSanitizer (make SANITIZER=thread tsan-suite): the integration tests
# that load tallyd from many threads at once - mixed writes, snapshots,
# SIGHUP reloads, kill -9, a full disk - with --shards 32 (TSan's deadlock
# detector holds at most 64 locks; the snapshot barrier takes every shard's).
# A TSan report in a tallyd log fails the test.  TALLY_SLOW shortens the
# loops for the slower build.  The unit tests that run threads - the
# keyspace against its model with writers, expiry, eviction and a snapshot at
# once, and the time-zone cache - run first.
TSAN_UNIT := test_keyspace test_keyspace_model test_cmd_zone
TSAN_IT := it_faults it_durability it_server it_policies it_security it_auth it_ts it_replication it_cluster it_cluster_etcd it_limits it_resp it_resp_keys it_resp_server it_grpc it_overrides it_reserve it_lease
tsan-suite: $(TALLYD) $(RESHARD) $(addprefix $(BUILD)/tests/unit/,$(TSAN_UNIT)) \
            $(addprefix $(BUILD)/tests/integration/,$(TSAN_IT))
	@set -e; for t in $(TSAN_UNIT); do echo "== $(BUILD)/tests/unit/$$t (ThreadSanitizer)"; \
	  timeout 600 $(BUILD)/tests/unit/$$t; done
	@set -e; for t in $(TSAN_IT); do echo "== $(BUILD)/tests/integration/$$t (ThreadSanitizer)"; \
	  TALLYD_ARGS="--shards 32" TALLY_SLOW=1 TALLYD=$(TALLYD) BUILD=$(BUILD) \
	  timeout 600 $(BUILD)/tests/integration/$$t; done

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

integration: $(TALLYD) $(RESHARD) $(IT_BIN)
	@set -e; for t in $(IT_BIN); do echo "== $$t"; TALLYD=$(TALLYD) BUILD=$(BUILD) $$t; done

fuzz-regress: $(FUZZ_BIN)
	@set -e; for t in $(FUZZ_BIN); do n=$$(basename $$t); \
	  echo "== $$t"; $$t tests/fuzz/corpus/$$n tests/fuzz/regress/$$n; done

# valgrind on the unit tests (STYLE.md: a valgrind target next to make test);
# not part of make test, which runs the sanitizer build instead.
valgrind: deps-valgrind
	@$(MAKE) --no-print-directory $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== valgrind $$t"; \
	  valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite $$t; done

openapi-check: $(TALLYD)
	node tools/openapi/check.mjs openapi.yaml $(TALLYD)

# Redocly CLI's recommended-strict rules (tools/openapi/README.md says why).
openapi-lint:
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
	  tools/openapi/node_modules/.bin/redocly lint --config tools/openapi/redocly.yaml --format=stylish openapi.yaml

lint-yaml:
	yamllint -s -c tools/yamllint.yml openapi.yaml deploy
	node tools/openapi/check-deploy.mjs Dockerfile deploy/kubernetes/*.yaml deploy/gateways/kubernetes-sidecar/*.yaml \
	  deploy/gateways/traefik/middleware-k8s.yaml deploy/etcd/*.yaml

# Alert rules: syntax and semantics (promtool check), behaviour on made-up
# series (promtool test); every metric the dashboard and the rules use is one
# tallyd exports.
monitoring-check:
	promtool check rules deploy/monitoring/alerts.yml
	promtool test rules deploy/monitoring/alerts-test.yml
	node tools/openapi/check-monitoring.mjs deploy/monitoring/grafana-dashboard.json deploy/monitoring/alerts.yml

# The man page renders without a warning and covers every option of --help.
man-check: $(TALLYD)
	sh tools/check-man.sh man/tallyd.8 $(TALLYD)

# docs/configuration.md's table has every option of --help, with its
# environment variable and default.
config-check: $(TALLYD)
	sh tools/check-config.sh docs/configuration.md $(TALLYD)

# make install into a scratch DESTDIR: the files land, the binary runs, the
# unit verifies (systemd-analyze, with the installed man page), and
# make uninstall leaves nothing behind.
install-check: $(TALLYD)
	sh tools/check-install.sh

# Every example of the README, of docs/ and of the deploy READMEs, run as
# written against a fresh tallyd on a free port (one per file), each answer
# compared with the one shown (HACKING.md, "Examples in the docs", has the
# convention).
EXAMPLE_DOCS := README.md $(wildcard docs/*.md) $(wildcard deploy/README.md deploy/*/README.md deploy/*/*/README.md)
examples-check: $(TALLYD)
	node tools/check-examples.mjs $(TALLYD) $(EXAMPLE_DOCS)

# Every relative link and anchor of the docs resolves (remark-validate-links),
# and every page of docs/ is linked from the README.
LINK_DOCS := README.md HACKING.md bench/HISTORY.md docs $(wildcard deploy/README.md deploy/*/README.md deploy/*/*/README.md)
links-check:
	sh tools/check-links.sh $(LINK_DOCS)

# The chart script renders a small fixed results file without a word from
# gnuplot, into SVGs that hold what the file says.
charts-check:
	sh tools/check-charts.sh tests/fixtures/bench/charts.tsv $(BUILD)/charts-check

# ---------------------------------------------------------------- bench --
bench: deps-bench
	@$(MAKE) --no-print-directory all $(BENCH_BIN)
	BUILD=$(BUILD) sh bench/run.sh

# The charts of the last make bench (its $(BUILD)/bench/charts.tsv) drawn
# again into docs/img/ (CHARTS_DIR to draw them elsewhere).
CHARTS_DIR ?= docs/img
charts:
	sh bench/charts.sh $(BUILD)/bench/charts.tsv $(CHARTS_DIR)

# ----------------------------------------------------------------- docs --
# openapi.yaml as a browsable page (Redocly CLI, pinned in tools/openapi):
# build/docs/api.html, one file with Redoc's scripts inlined, readable
# offline (only icons come from Redocly's CDN).  make test builds it too,
# so the page cannot stop building.
docs: deps-test
	@$(MAKE) --no-print-directory api-page
api-page:
	@mkdir -p build/docs
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
	  tools/openapi/node_modules/.bin/redocly build-docs openapi.yaml --inlineBundle --title 'tally HTTP API' \
	  --output build/docs/api.html

# ----------------------------------------------------------------- fuzz --
FUZZ_SECONDS ?= 60
FUZZ_BUILD := build/fuzz
fuzz: deps-fuzz $(REGISTRIES) $(PB_STAMP)
	@set -e; mkdir -p $(FUZZ_BUILD); \
	for src in $(FUZZ_SRC); do n=$$(basename $$src .c); \
	  clang -std=c11 -D_GNU_SOURCE -g -O1 -I. -I$(GEN) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    -o $(FUZZ_BUILD)/$$n $$src $(CORE_SRC) $(CMD_SRC) $(RESP_SRC) $(API_SRC) $(REDIS_SRC) $(RLS_SRC) $(GRPC_SRC) $(PB_SRC) $(SVC_SRC) $(BASE_LIBS) -pthread; \
	  mkdir -p tests/fuzz/corpus/$$n tests/fuzz/regress/$$n; \
	  echo "== fuzzing $$n for $(FUZZ_SECONDS)s"; \
	  mkdir -p $(FUZZ_BUILD)/corpus-$$n; $(FUZZ_BUILD)/$$n -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=tests/fuzz/regress/$$n/ \
	    $(FUZZ_BUILD)/corpus-$$n tests/fuzz/corpus/$$n || exit 1; \
	done

.SECONDARY:

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
