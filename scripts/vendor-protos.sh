#!/usr/bin/env bash
# Copies the third-party protos Sluice builds on from their npm packages into proto/,
# so that `buf generate` and polyglot consumers see one self-contained tree.
set -euo pipefail
cd "$(dirname "$0")/.."
cp node_modules/google-proto-files/google/rpc/status.proto proto/google/rpc/
cp node_modules/google-proto-files/google/rpc/error_details.proto proto/google/rpc/
cp node_modules/grpc-health-check/proto/health/v1/health.proto proto/grpc/health/v1/
cp node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto proto/grpc/reflection/v1/
cp node_modules/@grpc/reflection/build/proto/grpc/reflection/v1alpha/reflection.proto proto/grpc/reflection/v1alpha/
