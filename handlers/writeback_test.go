package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/hanzoai/deploy/auth"
)

func TestAuthorOf(t *testing.T) {
	for _, c := range []struct {
		p           auth.Principal
		name, email string
	}{
		{auth.Principal{Subject: "u1", Username: "ada", Name: "Ada Lovelace", Email: "ada@example.com"}, "Ada Lovelace", "ada@example.com"},
		{auth.Principal{Subject: "u1", Username: "ada", Issuer: "https://id.example.com/realms/x"}, "ada", "u1@id.example.com"},
		{auth.Principal{Subject: "u1"}, "u1", "u1@localhost"},
	} {
		if name, email := authorOf(&c.p); name != c.name || email != c.email {
			t.Errorf("%+v: %q <%q>, want %q <%q>", c.p, name, email, c.name, c.email)
		}
	}
}

type wbErr struct{ conflict, invalid bool }

func (e wbErr) Error() string  { return "write-back said no" }
func (e wbErr) Conflict() bool { return e.conflict }
func (e wbErr) Invalid() bool  { return e.invalid }

func TestWriteBackErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{wbErr{conflict: true}, http.StatusConflict},
		{fmt.Errorf("wrapped: %w", wbErr{invalid: true}), http.StatusBadRequest},
		{context.DeadlineExceeded, http.StatusGatewayTimeout},
		{errors.New("push refused"), http.StatusBadGateway},
	} {
		var ae *apiError
		if err := writeBackError(c.err); !errors.As(err, &ae) || ae.Code != c.code {
			t.Errorf("%v: %v, want %d", c.err, err, c.code)
		}
	}
}
