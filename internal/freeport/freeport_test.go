package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestOn(t *testing.T) {
	for _, host := range []string{"", "127.0.0.1"} {
		port, err := On(host)
		if err != nil || port <= 0 || port > 65535 {
			t.Fatalf("On(%q) = %d, %v", host, port, err)
		}
		// Free means bindable now.
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("On(%q) = %d, which cannot be bound: %v", host, port, err)
		}
		l.Close()
	}
	if _, err := On("256.0.0.1"); err == nil {
		t.Error("On(256.0.0.1) succeeded, want an error")
	}
}

func TestBelowEphemeral(t *testing.T) {
	start := ephemeralStart()
	seen := map[int]bool{}
	for range 20 {
		port, err := BelowEphemeral("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if start-10000 >= 1000 && (port < 10000 || port >= start) {
			t.Fatalf("BelowEphemeral = %d, want a port in [10000, %d)", port, start)
		}
		if seen[port] {
			t.Fatalf("BelowEphemeral returned %d twice in a row of 20", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("BelowEphemeral = %d, which cannot be bound: %v", port, err)
		}
		l.Close()
	}
	if _, err := BelowEphemeral("256.0.0.1"); err == nil {
		t.Error("BelowEphemeral(256.0.0.1) succeeded, want an error")
	}
}
