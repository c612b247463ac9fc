package memoryd

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// Error is every error a Client call returns for a failed RPC. errors.As(err, &*Error) finds
// it; status.FromError(err) still gives the full status with its details.
type Error struct {
	Code    codes.Code
	Message string
	// Reason is the google.rpc.ErrorInfo reason, e.g. "VIEW_DENIED" (see pb.ErrorReason).
	Reason string
	// Domain and Metadata are the rest of the ErrorInfo detail.
	Domain   string
	Metadata map[string]string
	// Violations maps each bad field of the google.rpc.BadRequest detail to its description.
	Violations map[string]string
	// RequestID names the call in the server's log (ErrorInfo metadata or x-request-id trailer).
	RequestID string
	// RetryDelay is the google.rpc.RetryInfo delay the server asked for (0 when none).
	RetryDelay time.Duration
	// Attempts is how often the call was tried.
	Attempts int

	status *status.Status
}

func (e *Error) Error() string {
	msg := "memoryd: " + CodeName(e.Code)
	if e.Reason != "" {
		msg += " " + e.Reason
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request id " + e.RequestID + ")"
	}
	return msg
}

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// ReasonCode is Reason as the contract's enum (ERROR_REASON_UNSPECIFIED when unknown).
func (e *Error) ReasonCode() pb.ErrorReason {
	return pb.ErrorReason(pb.ErrorReason_value["ERROR_REASON_"+e.Reason])
}

// Retryable says whether the same call may succeed later (UNAVAILABLE). The client has already
// retried it when that was safe; Attempts says how often.
func (e *Error) Retryable() bool { return retryableCode(e.Code) }

func toError(err error, trailer metadata.MD, attempts int) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Message: st.Message(), Attempts: attempts, status: st}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			e.Reason, e.Domain, e.Metadata = d.GetReason(), d.GetDomain(), d.GetMetadata()
			if id := d.GetMetadata()["request_id"]; id != "" {
				e.RequestID = id
			}
		case *errdetails.RetryInfo:
			e.RetryDelay = d.GetRetryDelay().AsDuration()
		case *errdetails.BadRequest:
			if e.Violations == nil {
				e.Violations = map[string]string{}
			}
			for _, v := range d.GetFieldViolations() {
				e.Violations[v.GetField()] = v.GetDescription()
			}
		}
	}
	if ids := trailer.Get("x-request-id"); e.RequestID == "" && len(ids) > 0 {
		e.RequestID = ids[0]
	}
	return e
}

var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// CodeName is the canonical name of a gRPC status code, e.g. "INVALID_ARGUMENT".
func CodeName(c codes.Code) string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return c.String()
}
