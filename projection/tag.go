package projection

import (
	"regexp"
	"strings"
)

// ImageRef is an image reference split into its parts:
// [registry/]path[:tag][@digest].
type ImageRef struct {
	Repository string // everything before the tag and digest
	Tag        string
	Digest     string // e.g. sha256:abc…
}

// ParseImage splits an image reference. The tag is the part after the last
// ':' that follows the last '/', so a registry port ("localhost:5000/app")
// is never taken for a tag; everything after '@' is the digest.
func ParseImage(image string) ImageRef {
	var r ImageRef
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image, r.Digest = image[:i], image[i+1:]
	}
	slash := strings.LastIndexByte(image, '/')
	if c := strings.LastIndexByte(image, ':'); c > slash {
		image, r.Tag = image[:c], image[c+1:]
	}
	r.Repository = image
	return r
}

// Version is what the image runs, in the form an App declares it: the tag,
// "tag@digest" when pinned, the digest alone when there is no tag, and
// "latest" when there is neither (what a runtime pulls).
func (r ImageRef) Version() string {
	switch {
	case r.Tag != "" && r.Digest != "":
		return r.Tag + "@" + r.Digest
	case r.Tag != "":
		return r.Tag
	case r.Digest != "":
		return r.Digest
	case r.Repository != "":
		return "latest"
	}
	return ""
}

// ImageTag is the version of an image reference (see ImageRef.Version).
func ImageTag(image string) string { return ParseImage(image).Version() }

// SyncCode is the Argo CD sync vocabulary.
type SyncCode string

// The sync codes.
const (
	SyncSynced    SyncCode = "Synced"
	SyncOutOfSync SyncCode = "OutOfSync"
	SyncUnknown   SyncCode = "Unknown"
)

// SyncOf compares the declared and the running version: either empty is
// Unknown; the same tag is Synced. A digest counts only when both sides name
// one: "v1.2.3" declared and "v1.2.3@sha256:…" running are Synced, two
// different digests of the same tag are not.
func SyncOf(declared, running string) SyncCode {
	if declared == "" || running == "" {
		return SyncUnknown
	}
	if declared == running {
		return SyncSynced
	}
	dt, dd, _ := strings.Cut(declared, "@")
	rt, rd, _ := strings.Cut(running, "@")
	if dt == rt && (dd == "" || rd == "" || dd == rd) && dt != "" {
		return SyncSynced
	}
	return SyncOutOfSync
}

var semverTag = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// IsSemverTag reports whether tag is a clean vX.Y.Z release tag.
func IsSemverTag(tag string) bool { return semverTag.MatchString(tag) }

// RepoParts splits an image repository into its registry (empty when the
// first path element is not a host), its owner (the org of the drift board)
// and owner/name.
func RepoParts(repository string) (registry, owner, repo string) {
	path := repository
	if i := strings.IndexByte(path, '/'); i >= 0 {
		first := path[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			registry, path = first, path[i+1:]
		}
	}
	if i := strings.IndexByte(path, '/'); i >= 0 {
		owner = path[:i]
	}
	return registry, owner, path
}
