// Package streamtest holds test helpers for code that serves or reads the
// stream package's SSE streams: a fake Clock to drive heartbeats, token
// expiry and the resume ring's age without sleeping, and a Reader that
// parses an SSE byte stream frame by frame, comments included.
package streamtest
