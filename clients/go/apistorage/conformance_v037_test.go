//go:build k8s_v037

package apistorage_test

import (
	"context"
	"testing"

	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
)

// The tests whose signature is v0.37's, as etcd3's tests call them there,
// and those new in it. RunTestList gets no recorder: it reads one only
// with the watch cache on. RunTestStats runs without size estimation, as
// etcd3's runs without sizeBasedListCostEstimate.
var versionTests = []conformanceTest{
	{"ProgressNotify", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunOptionalTestProgressNotify(ctx, t, f.store, f.increaseRV)
	}},
	{"GetListNonRecursive", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestGetListNonRecursive(ctx, t, f.increaseRV, f.store)
	}},
	{"List", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestList(ctx, t, f.store, f.compact, false, nil)
	}},
	{"ConsistentList", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestConsistentList(ctx, t, f.store, f.increaseRV, false, true, false)
	}},
	{"CompactRevision", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestCompactRevision(ctx, t, f.store, f.increaseRV, f.compact)
	}},
	{"KeySchema", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestKeySchema(ctx, t, f.store)
	}},
	{"Stats", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestStats(ctx, t, f.store, f.codec, identity.NewEncryptCheckTransformer(), false)
	}},
}
