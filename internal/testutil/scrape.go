package testutil

import (
	"io"
	"net/http"
	"testing"
)

// Scrape returns one scrape of the Prometheus exporter listening at addr
// ("host:port"), failing the test unless it answers 200 with a body.
func Scrape(t testing.TB, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", addr, resp.StatusCode, err)
	}
	return string(body)
}
