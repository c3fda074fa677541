// Package enginetest serves real git repositories for the engine's tests:
// the system git's http-backend behind net/http/cgi on a loopback port (the
// smart HTTP protocol, fetch and push), with helpers that commit files
// through a working clone and push them, as a person or a later write-back
// would.
//
//	srv := enginetest.NewServer(t)
//	repo := srv.NewRepo(t, "fleet")
//	sha := repo.Commit(t, "add web", map[string]string{"crs/web.yaml": appYAML})
//
// A server belongs to the test that started it: t.Cleanup closes it and
// t.TempDir removes its repositories. A git binary and git-http-backend are
// required; without them the test fails (they are part of the build image).
package enginetest
