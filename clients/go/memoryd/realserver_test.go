package memoryd

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// TestAWatchOnARealServerResumesWithNothingLostOrRepeated runs against a real memoryd that
// tests/toolchains/test_go.py starts, through a relay the test cuts: MEMORYD_TEST_TARGET, a
// MEMORYD_TEST_TOKEN whose view reads and writes events, and the server's watch heartbeat in
// MEMORYD_TEST_HEARTBEAT (a Go duration). Without them there is no server to run against.
func TestAWatchOnARealServerResumesWithNothingLostOrRepeated(t *testing.T) {
	target, token := os.Getenv("MEMORYD_TEST_TARGET"), os.Getenv("MEMORYD_TEST_TOKEN")
	if target == "" || token == "" {
		t.Skip("needs a real server: tests/toolchains/test_go.py runs it with one")
	}
	heartbeat, err := time.ParseDuration(os.Getenv("MEMORYD_TEST_HEARTBEAT"))
	if err != nil {
		t.Fatalf("MEMORYD_TEST_HEARTBEAT: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	subject := "go-watch-" + NewIdempotencyKey()[:8]
	writer, err := Dial(target, WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	write := func(text string) {
		t.Helper()
		_, err := writer.Write(ctx, &pb.WriteRequest{Subject: subject, Items: []*pb.MemoryDraft{
			{Category: pb.Category_CATEGORY_EVENT, Text: text}}})
		if err != nil {
			t.Fatalf("write %q: %v", text, err)
		}
	}
	r := startRelay(t, target)
	watcher := dialFast(t, r.lis.Addr().String(), WithToken(token), WithHeartbeatInterval(heartbeat))
	w, err := watcher.Watch(ctx, &pb.WatchRequest{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WaitOpen(ctx); err != nil { // the server's first heartbeat carries its headers
		t.Fatal(err)
	}
	var got []string
	read := func(n int) {
		t.Helper()
		for range n {
			resp, err := w.Next(ctx)
			if err != nil {
				t.Fatalf("after %v: %v", got, err)
			}
			if kind := resp.GetChange().GetKind(); kind != pb.MemoryChangeKind_MEMORY_CHANGE_KIND_CREATED {
				t.Fatalf("after %v: a %v change", got, kind)
			}
			got = append(got, resp.GetChange().GetMemory().GetText())
		}
	}
	write("one")
	read(1)
	if n := r.drop(); n < 1 { // the stream fails: the watcher reopens from its cursor
		t.Fatalf("%d connections through the relay, want the watcher's", n)
	}
	write("two")
	write("three")
	read(2)
	r.freeze() // the connection goes silent: after 3 heartbeats the watcher reopens on a new one
	write("four")
	read(1)
	want := []string{"one", "two", "three", "four"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("changes %v, want %v", got, want)
	}
	// Nothing twice: no further change arrives while two heartbeats come and go.
	quiet, stop := context.WithTimeout(ctx, 2*heartbeat)
	defer stop()
	if resp, err := w.Next(quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after %v: %v, %v", got, resp, err)
	}
}
