// SPDX-License-Identifier: Apache-2.0

// Package configkeys reads the collector components' configuration keys and
// says which key a misspelt one may have meant (Near, which the CLI's flags
// use too). Checking the values is configcheck's, apart because the engine
// uses it and must not depend on the collector's confmap.
package configkeys

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
)

// Unmarshal unmarshals conf into cfg, as the collector would, and when
// conf holds keys cfg has not, says for each that is near one it has which
// it may have meant: "decisionwait: did you mean decision_wait?".
// Components call it from their Config's Unmarshal.
func Unmarshal(conf *confmap.Conf, cfg any) error {
	err := conf.Unmarshal(cfg)
	if err == nil {
		return nil
	}
	known, prefixes := Keys(reflect.TypeOf(cfg))
	var hints []string
	for _, k := range conf.AllKeys() {
		key := strings.ReplaceAll(k, confmap.KeyDelimiter, ".")
		if slices.Contains(known, key) || hasPrefix(key, prefixes) {
			continue
		}
		if near := Near(key, known, 1); len(near) > 0 {
			hints = append(hints, fmt.Sprintf("%s: did you mean %s?", key, near[0]))
		}
	}
	if len(hints) == 0 {
		return err
	}
	slices.Sort(hints)
	return fmt.Errorf("%w\n%s", err, strings.Join(hints, "\n"))
}

func hasPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p+".") {
			return true
		}
	}
	return false
}

// Keys lists the configuration keys of a configuration type, by its
// mapstructure tags, dotted ("store.dsn"); prefixes are the keys of maps
// and other values whose keys are their own (anything below them).
func Keys(typ reflect.Type) (keys, prefixes []string) {
	var walk func(prefix string, t reflect.Type, depth int)
	walk = func(prefix string, t reflect.Type, depth int) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if depth > 8 || t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if opts == "squash" {
				walk(prefix, ft, depth+1)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			key := prefix + name
			if inner, ok := optionalValue(ft); ok {
				ft = inner
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}) && ft.NumField() > 0 && hasTags(ft):
				walk(key+".", ft, depth+1)
			case ft.Kind() == reflect.Map || ft.Kind() == reflect.Interface || ft.Kind() == reflect.Slice:
				keys = append(keys, key)
				prefixes = append(prefixes, key)
			default:
				keys = append(keys, key)
			}
		}
	}
	walk("", typ, 0)
	return keys, prefixes
}

// optionalValue is the T of a configoptional.Optional[T], which keeps its
// value in an unexported field.
func optionalValue(t reflect.Type) (reflect.Type, bool) {
	if t.Kind() != reflect.Struct || !strings.HasPrefix(t.Name(), "Optional[") {
		return nil, false
	}
	if f, ok := t.FieldByName("value"); ok {
		return f.Type, true
	}
	return nil, false
}

// hasTags reports whether a struct has mapstructure keys, so that a struct
// read as one value (a component ID, whose fields are all "-") is a key
// itself.
func hasTags(t reflect.Type) bool {
	for i := range t.NumField() {
		if tag, ok := t.Field(i).Tag.Lookup("mapstructure"); ok && tag != "-" {
			return true
		}
	}
	return false
}
