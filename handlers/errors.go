package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
)

// apiError is an error with a status and a message safe to show a client.
// Cause, when set, is logged and never sent.
type apiError struct {
	Code    int
	Message string
	Cause   error
	// Refusal names why a credential or its rights were refused (a fixed
	// word, for metrics); "" for other errors.
	Refusal string
}

func (e *apiError) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *apiError) Unwrap() error { return e.Cause }

// errorf answers code with a client-safe message.
func errorf(code int, msg string) error { return &apiError{Code: code, Message: msg} }

// errorCause answers code with a client-safe message and logs cause.
func errorCause(code int, msg string, cause error) error {
	return &apiError{Code: code, Message: msg, Cause: cause}
}

// refusal answers code (401 or 403) with a client-safe message, and names
// the refusal's reason for metrics.
func refusal(code int, reason, msg string) error {
	return &apiError{Code: code, Message: msg, Refusal: reason}
}

// refusalCause is refusal with a cause to log.
func refusalCause(code int, reason, msg string, cause error) error {
	return &apiError{Code: code, Message: msg, Cause: cause, Refusal: reason}
}

// errorBody is the one error shape of the whole API.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Code    int    `json:"code"`
}

// errorHandler is Echo's central error handler: every error a handler
// returns, and every panic the recover middleware catches, is answered here.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		code, msg := http.StatusInternalServerError, "internal error"
		var ae *apiError
		var he *echo.HTTPError
		switch {
		case errors.As(err, &ae):
			code, msg = ae.Code, ae.Message
			if ae.Cause != nil {
				log.LogAttrs(c.Request().Context(), slog.LevelWarn, "request failed",
					slog.String("path", c.Path()), slog.Int("status", code), slog.String("cause", ae.Cause.Error()))
			}
		case errors.As(err, &he):
			code = he.Code
			msg = http.StatusText(code)
			if s, ok := he.Message.(string); ok && code < 500 {
				msg = s
			}
		default:
			log.LogAttrs(c.Request().Context(), slog.LevelError, "unhandled error",
				slog.String("path", c.Path()), slog.String("cause", err.Error()))
		}
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(code)
			return
		}
		// Written without HTML escaping: messages quote what to send
		// ("add ?appNamespace=<namespace>") and are read by people.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(errorBody{Error: msg, Message: msg, Code: code})
		_ = c.Blob(code, echo.MIMEApplicationJSON, b.Bytes())
	}
}
