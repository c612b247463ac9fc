package memoryd

import (
	"math"
	mrand "math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// The policy every memoryd client follows (clients/conformance/policy.json; policy_test.go
// checks these values and the method table against that file).
const (
	// DefaultTimeout is the deadline of each attempt of a call (WithTimeout, CallTimeout).
	DefaultTimeout = 30 * time.Second
	// DefaultMaxAttempts counts the first attempt: 1 call and up to 3 retries.
	DefaultMaxAttempts       = 4
	DefaultInitialBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff        = 2 * time.Second
	DefaultBackoffMultiplier = 2.0
	DefaultJitter            = 0.5

	// DefaultHeartbeatInterval is how often an idle Watch stream gets a heartbeat, the server's
	// default (WithHeartbeatInterval when the server is configured otherwise).
	DefaultHeartbeatInterval = 15 * time.Second
	// WatchStallFactor: a Watch stream on which nothing, not even a heartbeat, arrived for this
	// many heartbeat intervals is taken for dead (a half-open connection) and opened again.
	WatchStallFactor = 3

	// DefaultKeepaliveTime: a connection that received nothing for this long is pinged, with or
	// without a call open; DefaultKeepaliveTimeout: without an answer in this time it is closed,
	// so the next call connects afresh instead of waiting out its deadline on a connection a NAT
	// or proxy dropped. A memoryd server accepts a ping every 5 s and answers faster ones with
	// GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (WithKeepalive).
	DefaultKeepaliveTime    = 30 * time.Second
	DefaultKeepaliveTimeout = 10 * time.Second
)

// DefaultKeepalive is the keepalive a Client dials with unless WithKeepalive says otherwise.
func DefaultKeepalive() keepalive.ClientParameters {
	return keepalive.ClientParameters{Time: DefaultKeepaliveTime, Timeout: DefaultKeepaliveTimeout,
		PermitWithoutStream: true}
}

// retryCodes are the only status codes a call is retried on.
var retryCodes = []codes.Code{codes.Unavailable}

// RetryPolicy says how a call that failed with UNAVAILABLE is retried. Only calls whose replay
// is safe are retried at all (see the method table below); every other code fails at once.
// Start from DefaultRetryPolicy() and change fields: a zero duration means no wait.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt; 1 (or less) turns retries off.
	MaxAttempts int
	// Before retry n (n = 1 for the first retry) the client waits
	// min(MaxBackoff, InitialBackoff * Multiplier^(n-1)) scaled by a uniform random factor in
	// [1 - Jitter, 1], so clients that failed together do not come back together. A longer
	// RetryInfo delay from the server is waited instead.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Multiplier     float64
	Jitter         float64
}

// DefaultRetryPolicy is the policy a Client uses unless WithRetryPolicy says otherwise.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: DefaultMaxAttempts, InitialBackoff: DefaultInitialBackoff,
		MaxBackoff: DefaultMaxBackoff, Multiplier: DefaultBackoffMultiplier, Jitter: DefaultJitter}
}

// NoRetries tries every call once.
func NoRetries() RetryPolicy { return RetryPolicy{MaxAttempts: 1} }

// ceiling is the pause before retry n without jitter.
func (p RetryPolicy) ceiling(n int) time.Duration {
	d := float64(p.InitialBackoff) * math.Pow(p.Multiplier, float64(n-1))
	if limit := float64(p.MaxBackoff); d > limit || math.IsNaN(d) {
		d = limit
	}
	if d <= 0 {
		return 0
	}
	return time.Duration(d)
}

// Backoff is the pause before retry n (n >= 1).
func (p RetryPolicy) Backoff(n int) time.Duration {
	jitter := min(max(p.Jitter, 0), 1)
	return time.Duration(float64(p.ceiling(n)) * (1 - jitter*mrand.Float64()))
}

// retryRule says when a method may be retried after UNAVAILABLE: a replay must never apply
// twice, so a method without an idempotency key in the contract is never retried.
type retryRule string

const (
	retryAlways                retryRule = "always"
	retryNever                 retryRule = "never"
	retryUnlessExpectedVersion retryRule = "unless_expected_version"
	// retryResume: a Watch stream is opened again from the last cursor received (Watcher),
	// never replayed as a unary call.
	retryResume retryRule = "resume"
)

// retryRules holds every RPC of the contract. A method missing here is never retried.
var retryRules = map[string]retryRule{
	// Write: the client gives a request without an idempotency key a fresh UUID before the
	// first attempt and sends it on every retry, so the server applies it once.
	pb.MemoryService_Write_FullMethodName:            retryAlways,
	pb.MemoryService_Recall_FullMethodName:           retryAlways,
	pb.MemoryService_Erase_FullMethodName:            retryAlways, // a replay erases nothing more
	pb.MemoryService_MemoryView_FullMethodName:       retryAlways,
	pb.MemoryService_GetHistory_FullMethodName:       retryAlways,
	pb.MemoryService_GetExtractionJob_FullMethodName: retryAlways,
	pb.MemoryService_ResolveConflict_FullMethodName:  retryNever, // no idempotency key: could apply twice
	pb.MemoryService_ExportMemories_FullMethodName:   retryAlways,
	pb.MemoryService_ImportMemories_FullMethodName:   retryNever, // no idempotency key: could import twice
	pb.MemoryService_Watch_FullMethodName:            retryResume,
	// EndSession: ending again rebuilds the same snapshot, so a replay has no second effect.
	pb.MemoryService_EndSession_FullMethodName:    retryAlways,
	pb.MemoryService_ResumeSession_FullMethodName: retryAlways,
	// PutView with an expected_version: a replay would fail on the version the first attempt bumped.
	pb.ViewAdminService_PutView_FullMethodName:    retryUnlessExpectedVersion,
	pb.ViewAdminService_GetView_FullMethodName:    retryAlways,
	pb.ViewAdminService_ListViews_FullMethodName:  retryAlways,
	pb.ViewAdminService_DeleteView_FullMethodName: retryAlways, // a replay finds nothing to delete
}

// mayRetry says whether a failed attempt of method with req may be tried again.
func mayRetry(method string, req any) bool {
	switch retryRules[method] {
	case retryAlways:
		return true
	case retryUnlessExpectedVersion:
		versioned, ok := req.(interface{ GetExpectedVersion() int64 })
		return ok && versioned.GetExpectedVersion() == 0
	default:
		return false
	}
}

func retryableCode(c codes.Code) bool {
	for _, rc := range retryCodes {
		if c == rc {
			return true
		}
	}
	return false
}
