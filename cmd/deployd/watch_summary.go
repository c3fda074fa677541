package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// The health and sync codes a summary always prints, in this order (others
// the server may answer follow, sorted).
var (
	summaryHealth = []string{"Healthy", "Progressing", "Suspended", "Degraded", "Missing", "Unknown"}
	summarySync   = []string{"Synced", "OutOfSync", "Unknown"}
)

// summarize reads GET /v1/deploy/applications once, with the watch's
// filters, and prints the number of applications by health and by sync:
//
//	42 applications
//	health: Healthy 30, Progressing 5, Suspended 0, Degraded 4, Missing 2, Unknown 1
//	sync:   Synced 38, OutOfSync 3, Unknown 1
func summarize(ctx context.Context, streamURL, token string, stdout io.Writer) error {
	u, err := url.Parse(streamURL)
	if err != nil {
		return err
	}
	u.Path = strings.TrimSuffix(u.Path, "/stream/applications") + "/applications"
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("watch --summary: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return fmt.Errorf("watch --summary: the server refused the token (401 Unauthorized%s): it is missing, invalid or expired; sign in again (deployd login, or pass a token with --token or DEPLOYD_TOKEN)", serverMessage(resp.Body))
	case http.StatusForbidden:
		return fmt.Errorf("watch --summary: the token is valid but may not read the fleet (403 Forbidden%s)", serverMessage(resp.Body))
	default:
		return fmt.Errorf("watch --summary: the server answered %s%s", resp.Status, serverMessage(resp.Body))
	}
	var list struct {
		Items []struct {
			Status struct {
				Health struct {
					Status string `json:"status"`
				} `json:"health"`
				Sync struct {
					Status string `json:"status"`
				} `json:"sync"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return fmt.Errorf("watch --summary: the answer is not an application list: %w", err)
	}
	health, sync := map[string]int{}, map[string]int{}
	for _, it := range list.Items {
		health[orUnknown(it.Status.Health.Status)]++
		sync[orUnknown(it.Status.Sync.Status)]++
	}
	fmt.Fprintf(stdout, "%d applications\n", len(list.Items))
	fmt.Fprintf(stdout, "health: %s\n", counts(summaryHealth, health))
	fmt.Fprintf(stdout, "sync:   %s\n", counts(summarySync, sync))
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// counts lists every code of order, then any other code seen, sorted.
func counts(order []string, n map[string]int) string {
	var parts []string
	known := map[string]bool{}
	for _, c := range order {
		known[c] = true
		parts = append(parts, fmt.Sprintf("%s %d", c, n[c]))
	}
	var extra []string
	for c := range n {
		if !known[c] {
			extra = append(extra, c)
		}
	}
	sort.Strings(extra)
	for _, c := range extra {
		parts = append(parts, fmt.Sprintf("%s %d", c, n[c]))
	}
	return strings.Join(parts, ", ")
}
