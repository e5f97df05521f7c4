// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// registry is conformance/vocabulary.yaml.
type registry struct {
	Groups []*group `yaml:"groups"`
}

// group is one group of the registry; which of its lists it has depends on
// its type.
type group struct {
	ID      string    `yaml:"id"`
	Type    string    `yaml:"type"`
	Brief   string    `yaml:"brief"`
	Names   names     `yaml:"names"`
	Entries []*entry  `yaml:"entries"`
	Members []*member `yaml:"members"`
	Objects []*object `yaml:"objects"`
}

// entry is a named thing: a header, an attribute, a constant.
type entry struct {
	ID         string      `yaml:"id"`
	Type       string      `yaml:"type"`
	Brief      string      `yaml:"brief"`
	Stability  string      `yaml:"stability"`
	Value      yaml.Node   `yaml:"value"`
	Values     string      `yaml:"values"`
	Semconv    bool        `yaml:"semconv"`
	Deprecated *deprecated `yaml:"deprecated"`
	Names      names       `yaml:"names"`
}

type deprecated struct {
	Reason    string `yaml:"reason"`
	RenamedTo string `yaml:"renamed_to"`
}

// member is one value of an enum.
type member struct {
	ID         string `yaml:"id"`
	Value      string `yaml:"value"`
	Brief      string `yaml:"brief"`
	Suppressed bool   `yaml:"suppressed"`
}

// object is one JSON object of a document, with its fields in order.
type object struct {
	ID     string   `yaml:"id"`
	Brief  string   `yaml:"brief"`
	Fields []*field `yaml:"fields"`
}

type field struct {
	ID    string `yaml:"id"`
	Type  string `yaml:"type"`
	Brief string `yaml:"brief"`
}

// names are an entry's identifiers in the generated code.
type names struct {
	Go       string `yaml:"go"`
	GoPrefix string `yaml:"go_prefix"`
	Const    string `yaml:"const"`
	Java     string `yaml:"java"`
	TS       string `yaml:"ts"`
	Py       string `yaml:"py"`
}

func (n names) java() string { return cmp.Or(n.Java, n.Const) }
func (n names) ts() string   { return cmp.Or(n.TS, n.Const) }
func (n names) py() string   { return cmp.Or(n.Py, n.Const) }

// The group types the generator knows.
const (
	typeHeader     = "header"
	typeAttributes = "attribute_group"
	typeEnum       = "enum"
	typeDocument   = "document"
	typeConstant   = "constant"
)

// ourNamespace is where every attribute of ours lives: a namespace no
// semantic convention owns.
const ourNamespace = "error_ownership."

// parse reads a registry strictly: an unknown key is a typo, not an
// extension.
func parse(b []byte) (*registry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	r := new(registry)
	if err := dec.Decode(r); err != nil {
		return nil, err
	}
	return r, r.validate()
}

func (r *registry) groupsOf(typ string) []*group {
	var gs []*group
	for _, g := range r.Groups {
		if g.Type == typ {
			gs = append(gs, g)
		}
	}
	return gs
}

func (r *registry) enum(id string) *group {
	for _, g := range r.groupsOf(typeEnum) {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// attributes returns the attribute entries, current (deprecated false) or
// legacy (true).
func (r *registry) attributes(legacy bool) []*entry {
	var es []*entry
	for _, g := range r.groupsOf(typeAttributes) {
		for _, e := range g.Entries {
			if (e.Deprecated != nil) == legacy {
				es = append(es, e)
			}
		}
	}
	return es
}

// validate refuses a registry that would generate wrong or clashing code,
// or names the semantic conventions' rules forbid.
func (r *registry) validate() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	groupIDs := map[string]bool{}
	// Identifiers share one scope per language: every generated constant
	// lands in one file (one Go package, one Java class, one module).
	idents := map[string]map[string]string{"go": {}, "java": {}, "ts": {}, "py": {}}
	claim := func(lang, ident, owner string) {
		if ident == "" {
			return
		}
		if prev, ok := idents[lang][ident]; ok {
			fail("%s identifier %s is both %s and %s", lang, ident, prev, owner)
		}
		idents[lang][ident] = owner
	}
	for _, g := range r.Groups {
		if groupIDs[g.ID] {
			fail("group %s appears twice", g.ID)
		}
		groupIDs[g.ID] = true
		if strings.TrimSpace(g.Brief) == "" {
			fail("group %s has no brief", g.ID)
		}
		switch g.Type {
		case typeHeader, typeAttributes, typeDocument, typeConstant:
		case typeEnum:
			if g.Names.Go == "" || g.Names.GoPrefix == "" || g.Names.Const == "" {
				fail("enum %s needs names go, go_prefix and const", g.ID)
			}
			claim("go", g.Names.Go, g.ID)
			if len(g.Members) == 0 {
				fail("enum %s has no members", g.ID)
			}
			seen, values := map[string]bool{}, map[string]bool{}
			for _, m := range g.Members {
				if seen[m.ID] || values[m.Value] {
					fail("enum %s: member %s (value %q) appears twice", g.ID, m.ID, m.Value)
				}
				seen[m.ID], values[m.Value] = true, true
				if !isSnake(m.ID) || strings.TrimSpace(m.Brief) == "" {
					fail("enum %s: member %q needs a snake_case id and a brief", g.ID, m.ID)
				}
				claim("go", g.Names.GoPrefix+camel(m.ID), g.ID+"."+m.ID)
				claim("java", g.Names.Const+"_"+upper(m.ID), g.ID+"."+m.ID)
			}
			if len(g.Members) > 8 {
				// The engine packs a decision into three bits of a span record.
				fail("enum %s has %d members; a span record holds at most 8", g.ID, len(g.Members))
			}
		default:
			fail("group %s: unknown type %q", g.ID, g.Type)
		}
		for _, e := range g.Entries {
			owner := g.ID + "/" + e.ID
			if strings.TrimSpace(e.Brief) == "" || (e.Names.Go == "" && e.Deprecated == nil) {
				fail("%s needs a brief and a Go name", owner)
			}
			claim("go", e.Names.Go, owner)
			if e.Deprecated == nil {
				if e.Names.Const == "" {
					fail("%s needs a const name", owner)
				}
				claim("java", e.Names.java(), owner)
				claim("ts", e.Names.ts(), owner)
				claim("py", e.Names.py(), owner)
			}
			switch g.Type {
			case typeDocument, typeConstant:
				if e.Value.Kind != yaml.ScalarNode {
					fail("%s has no value", owner)
				}
				if _, err := literal(e); err != nil {
					fail("%s: %v", owner, err)
				}
			default:
				if e.Value.Kind != 0 {
					fail("%s is a name, not a constant: it takes no value", owner)
				}
			}
			if e.Values != "" && r.enum(e.Values) == nil {
				fail("%s: values %q is no enum", owner, e.Values)
			}
		}
		for _, o := range g.Objects {
			for _, f := range o.Fields {
				if !isSnake(f.ID) {
					fail("%s.%s: a JSON field is snake_case", o.ID, f.ID)
				}
				claim("java", objectConst(o, f), o.ID+"."+f.ID)
			}
		}
	}
	errs = append(errs, r.checkAttributes()...)
	return errors.Join(errs...)
}

// checkAttributes applies the semantic conventions' naming rules to the
// attributes: no name is both an attribute and a namespace (error.claim
// and error.claim.reason was the mistake this registry was made to end),
// ours live under error_ownership, and a legacy name says what replaced it.
func (r *registry) checkAttributes() []error {
	var errs []error
	current := r.attributes(false)
	for _, a := range current {
		if !isAttrName(a.ID) {
			errs = append(errs, fmt.Errorf("attribute %q: a name is lower-case dot-separated snake_case", a.ID))
		}
		if a.Type != "int" && a.Type != "string" && r.enum(a.Type) == nil {
			errs = append(errs, fmt.Errorf("attribute %s: unknown type %q", a.ID, a.Type))
		}
		if !a.Semconv && !strings.HasPrefix(a.ID, ourNamespace) {
			errs = append(errs, fmt.Errorf("attribute %s lies outside %s*, in a namespace the semantic conventions may own", a.ID, ourNamespace))
		}
		for _, b := range current {
			if strings.HasPrefix(b.ID, a.ID+".") {
				errs = append(errs, fmt.Errorf("%s is both an attribute and the namespace of %s", a.ID, b.ID))
			}
		}
	}
	for _, l := range r.attributes(true) {
		if l.Deprecated.RenamedTo == "" || !slices.ContainsFunc(current, func(a *entry) bool { return a.ID == l.Deprecated.RenamedTo }) {
			errs = append(errs, fmt.Errorf("legacy attribute %s: renamed_to %q is no current attribute", l.ID, l.Deprecated.RenamedTo))
		}
		for _, a := range current {
			if a.ID == l.ID {
				errs = append(errs, fmt.Errorf("%s is both current and legacy", l.ID))
			}
		}
	}
	return errs
}

// literal returns an entry's value as source text common to Go, Java,
// TypeScript and Python: a quoted string or a number.
func literal(e *entry) (string, error) {
	v := e.Value.Value
	switch e.Type {
	case "string":
		if e.Value.Tag != "!!str" || strings.ContainsAny(v, "\"\\\n") {
			return "", fmt.Errorf("value %q is no plain string", v)
		}
		return `"` + v + `"`, nil
	case "int":
		if e.Value.Tag != "!!int" {
			return "", fmt.Errorf("value %q is no integer", v)
		}
		return v, nil
	case "double":
		if e.Value.Tag != "!!int" && e.Value.Tag != "!!float" {
			return "", fmt.Errorf("value %q is no number", v)
		}
		return v, nil
	}
	return "", fmt.Errorf("a constant's type is string, int or double, not %q", e.Type)
}

func isSnake(s string) bool {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		lower, digit := c >= 'a' && c <= 'z', c >= '0' && c <= '9'
		if !lower && !digit && c != '_' {
			return false
		}
	}
	return true
}

func isAttrName(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if !isSnake(part) {
			return false
		}
	}
	return true
}

// camel turns snake_case into CamelCase: missing_downstream_claim is
// MissingDownstreamClaim.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

func upper(s string) string { return strings.ToUpper(s) }

// objectConst names the constant for a JSON field: HINTS_FIELD_TTL_SECONDS,
// EDGE_FIELD_PEER_SERVICE.
func objectConst(o *object, f *field) string {
	return upper(o.ID) + "_FIELD_" + upper(f.ID)
}
