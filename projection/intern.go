package projection

import "unique"

// Intern returns the one copy of s shared by every summary that holds an
// equal string. Decoding interns the strings that repeat across objects —
// namespaces, label keys and values, owner references, container names
// and images, node names, phases, condition types, statuses and reasons —
// so that ten pods of one ReplicaSet hold its labels, its name and its
// image once, not ten times; the copies the wire decoding allocated become
// garbage. Strings unique to one object (its name, UID, resource version,
// messages) are not interned: the table's entry would cost more than it
// saves.
func Intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}
