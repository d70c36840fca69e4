# Sluice — build, run, test.
#   make run    build and start one broker (Kafka :9092) and the console (:8080), data under ./data
#   make test   install what the tests need when missing, then run every test
#   make test-short  the short tier: no ZooKeeper, browser, external client or
#                    package install (go test -short ./...), under two minutes
#   make screenshots every console page with demo data, light, dark and phone
#                    width, as PNGs in ./screenshots (headless Chromium)
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell cat VERSION 2>/dev/null || echo 0.0.0)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/sluice-io/sluice/internal/buildinfo.Version=$(VERSION) \
           -X github.com/sluice-io/sluice/internal/buildinfo.Commit=$(COMMIT)
# Debian packages the tests use: ZooKeeper for cluster tests, kcat and the
# Python client (librdkafka) for compatibility tests, with the modules its
# schema-registry client needs (requests, jsonschema), Burrow (sarama) for the
# lag-monitor test, Chromium for browser tests, rpm/dpkg tools and
# systemd-analyze for the packaging tests.
TEST_DEBS := zookeeper kcat chromium python3-confluent-kafka python3-kafka python3-requests python3-jsonschema rpm systemd lintian adduser nodejs curl ca-certificates burrow
# kafkajs (pure JavaScript, no dependencies) comes from the npm registry.
KAFKAJS_VERSION := 2.2.4
KAFKAJS_DIR ?= $(HOME)/.cache/sluice-test/kafkajs-$(KAFKAJS_VERSION)
TEST_TIMEOUT ?= 14m
# Test binaries run four at a time: most of the suite waits on child
# processes, ZooKeeper, browsers and network round trips, so two at a time
# (go test's default on a 2-core machine) left a core idle. On the 2-core
# dev VM a fresh-clone `make test` took 16 min 19 s with -p 2 and 10 min 51 s
# with -p 4.
TEST_PARALLEL ?= 4
FUZZTIME ?= 4s

.PHONY: all build run test test-short test-deps test-go test-fuzz fuzz generate check-generated docs vet fmt package bench soak clean screenshots

all: build

generate:
	@if ls templates/*.templ >/dev/null 2>&1 || find . -name '*.templ' -not -path './data/*' | grep -q .; then \
		$(GO) tool templ generate -log-level error; fi

build: generate
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/sluice ./cmd/sluice

run: build
	./bin/sluice serve

test-deps:
	@missing=""; for p in $(TEST_DEBS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing test dependencies:$$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@if [ ! -f "$(KAFKAJS_DIR)/node_modules/kafkajs/package.json" ]; then \
		echo "installing kafkajs $(KAFKAJS_VERSION) into $(KAFKAJS_DIR)"; \
		mkdir -p "$(KAFKAJS_DIR)/node_modules/kafkajs" && \
		curl -fsSL --retry 3 "https://registry.npmjs.org/kafkajs/-/kafkajs-$(KAFKAJS_VERSION).tgz" | \
			tar -xz -C "$(KAFKAJS_DIR)/node_modules/kafkajs" --strip-components=1; \
	fi

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

# The configuration reference and the packaged server.properties are written
# from the key table of package config; tests in config/ and packaging/ fail
# when they are stale.
docs:
	$(GO) run ./cmd/sluice config docs -o docs/configuration.md
	$(GO) run ./cmd/sluice config properties -o packaging/server.properties \
		--set log.dirs=/var/lib/sluice/kafka --set console.data.dir=/var/lib/sluice/console

# Generated templ code is committed; fail when it is stale.
# Fails when the committed *_templ.go files are not what `templ generate` makes
# of the .templ files (they are regenerated in place; commit the result).
check-generated:
	@before=$$(find . -name '*_templ.go' -not -path './data/*' | sort | xargs -r sha256sum); \
	$(GO) tool templ generate -log-level error; \
	after=$$(find . -name '*_templ.go' -not -path './data/*' | sort | xargs -r sha256sum); \
	if [ "$$before" != "$$after" ]; then \
		echo "generated templ code was stale (now regenerated; commit it):"; \
		diff <(echo "$$before") <(echo "$$after") | grep '^[<>]' | awk '{print "  " $$3}' | sort -u; exit 1; fi

test: test-deps check-generated build vet test-go test-fuzz

test-go:
	SLUICE_KAFKAJS_DIR=$(KAFKAJS_DIR) $(GO) test -count=1 -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) ./...

# The short tier (see testutil.Heavy): what needs no test-deps.
test-short:
	$(GO) test -count=1 -short -timeout 5m ./...

# The fuzz targets of the decoders that read bytes from outside — record
# batches and segments from disk, request frames and their handlers, Kafka framing,
# __consumer_offsets records, znodes, compared JSON — a few seconds each
# (longer: make test-fuzz FUZZTIME=5m). Every other target's seed corpus runs
# in test-go; `make fuzz` fuzzes them all.
FUZZ_PKGS ?= ./record ./storage ./protocol ./internal/kwire ./group ./txn ./zkcoord ./migration/jsondiff ./schemareg/serde
test-fuzz:
	./scripts/fuzz.sh $(FUZZTIME) $(FUZZ_PKGS)

fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

# The console's pages with demo data (internal/screenshots), for review.
SCREENSHOTS_DIR ?= $(CURDIR)/screenshots
screenshots: generate
	SLUICE_SCREENSHOTS_DIR=$(SCREENSHOTS_DIR) $(GO) test -count=1 -timeout 10m -run TestScreenshots ./internal/screenshots/
	@echo "screenshots in $(SCREENSHOTS_DIR)"

package: build
	./scripts/package.sh $(VERSION)

bench: build
	./scripts/bench.sh

# The soak test (internal/soak, build tag soak): mixed load on a three-broker
# ZooKeeper cluster for SOAK_DURATION, failing when a broker's RSS, goroutines
# or open files grow after warm-up. 5 minutes by default; the hour-long
# version is `make soak SOAK_DURATION=60m`. Every SOAK_* variable of
# internal/soak (SOAK_RATE, SOAK_PARTITIONS, SOAK_INTERVAL, SOAK_OUT, ...)
# can be given the same way.
SOAK_DURATION ?= 5m
SOAK_TIMEOUT ?= 3h
soak: build
	SLUICE_BIN=$(CURDIR)/bin/sluice SOAK_DURATION=$(SOAK_DURATION) \
		$(GO) test -tags soak -count=1 -run TestSoak -v -timeout $(SOAK_TIMEOUT) ./internal/soak

clean:
	rm -rf bin dist
