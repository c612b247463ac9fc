package memoryd_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
	"github.com/memoryd/memoryd/clients/go/memoryd"
)

// A token read again before every attempt: rotating the file rotates the client's token.
func ExampleWithTokenProvider() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithTokenProvider(func(context.Context) (string, error) {
		token, err := os.ReadFile(".memoryd/tokens/demo-agent.token")
		return strings.TrimSpace(string(token)), err
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// Every memory of a subject, page after page.
func ExampleClient_Memories() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(os.Getenv("MEMORYD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for m, err := range c.Memories(context.Background(), &pb.MemoryViewRequest{Subject: "alice", PageSize: 100}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.GetKey(), m.GetText())
	}
}

// Recall from the conversation itself: its recent turns, most recent last, and no query.
func ExampleClient_Recall() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(os.Getenv("MEMORYD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	now := timestamppb.Now()
	conversation := []*pb.Turn{
		{TurnId: "t1", Speaker: "user", Text: "I fly back next week.", Time: now},
		{TurnId: "t2", Speaker: "assistant", Text: "Where to?", Time: now},
		{TurnId: "t3", Speaker: "user", Text: "To my home city, of course!", Time: now},
	}
	found, err := c.Recall(context.Background(), &pb.RecallRequest{Subject: "alice", Context: conversation})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range found.GetMemories() {
		fmt.Println(m.GetMemory().GetText(), m.GetRelevance())
	}
}

// A worker acts on the decisions its view reads, resuming from the cursor it saved last time.
func ExampleClient_Watch() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(os.Getenv("MEMORYD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	saved, _ := os.ReadFile("worker.cursor") // empty the first time: changes from now on
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice",
		Categories: []pb.Category{pb.Category_CATEGORY_DECISION}, Cursor: string(saved)})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	for {
		resp, err := w.Next(context.Background())
		if err != nil {
			log.Fatal(err) // an *memoryd.Error the watcher cannot resume after, e.g. CURSOR_EXPIRED
		}
		fmt.Println(resp.GetChange().GetKind(), resp.GetChange().GetMemory().GetText())
		if err := os.WriteFile("worker.cursor", []byte(w.Cursor()), 0o600); err != nil {
			log.Fatal(err)
		}
	}
}

// A session ended on one device and resumed on another.
func ExampleClient_ResumeSession() {
	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(os.Getenv("MEMORYD_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.EndSession(ctx, &pb.EndSessionRequest{Subject: "alice", SessionId: "trip-1"}); err != nil {
		log.Fatal(err)
	}
	resumed, err := c.ResumeSession(ctx, &pb.ResumeSessionRequest{Subject: "alice"})
	if err != nil {
		log.Fatal(err) // NOT_FOUND when no snapshot the caller reads exists
	}
	snapshot := resumed.GetSnapshot()
	fmt.Println(snapshot.GetSessionId(), snapshot.GetSummary().GetText())
	for _, m := range snapshot.GetExplicit() {
		fmt.Println("kept:", m.GetText())
	}
}
