//go:build !k8s_v037

package apistorage_test

import (
	"context"
	"testing"

	storagetesting "k8s.io/apiserver/pkg/storage/testing"
)

// The tests whose signature is v0.32's, as etcd3's tests call them there.
var versionTests = []conformanceTest{
	{"ProgressNotify", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunOptionalTestProgressNotify(ctx, t, f.store)
	}},
	{"GetListNonRecursive", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestGetListNonRecursive(ctx, t, f.compact, f.store)
	}},
	{"List", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestList(ctx, t, f.store, f.compact, false)
	}},
	{"ConsistentList", false, func(ctx context.Context, t *testing.T, f *fixture) {
		storagetesting.RunTestConsistentList(ctx, t, f.store, f.compact, false, true)
	}},
	{"Count", false, func(ctx context.Context, t *testing.T, f *fixture) { storagetesting.RunTestCount(ctx, t, f.store) }},
}
