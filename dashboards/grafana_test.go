// SPDX-License-Identifier: Apache-2.0

package dashboards

// What Grafana does to a panel's SQL before PostgreSQL sees it, for the
// tests to run the panels as Grafana would. No Grafana server runs here;
// this follows Grafana's documentation and code of the PostgreSQL data
// source, in its three steps:
//
//  1. In the browser, template variables are replaced (the variable syntax:
//     $name, ${name}, ${name:format}, [[name]]) with the SQL data sources'
//     formatter: "Grafana automatically quotes template variable values
//     only when the template variable is a multi-value" (PostgreSQL
//     template variables, docs/sources/datasources/postgres/
//     template-variables): a variable that is multi-valued or has "All"
//     gets each value as a literal, quotes doubled, joined by commas; any
//     other gets its value with quotes doubled and no quotes around it
//     (packages/grafana-sql SqlDatasource.interpolateVariable). "All" is
//     the custom all value, inserted as it is without formatting
//     (TemplateSrv: "skip formatting of custom all values"), or else every
//     option's value. $__interval and $__interval_ms are the panel's
//     interval.
//  2. On the server, the global macros: $__interval_ms, $__interval,
//     $__unixEpochFrom() and $__unixEpochTo() are replaced as text
//     (sqleng.Interpolate).
//  3. The PostgreSQL macros (PostgreSQL query editor, "Macros"; macros.go):
//     $__timeFilter(col) is col BETWEEN 'from' AND 'to' in RFC 3339 UTC,
//     $__timeFrom() and $__timeTo() the quoted times, $__timeGroup(col,
//     interval) is floor(extract(epoch from col)/s)*s and $__timeGroupAlias
//     the same AS "time"; any other $name( is an error.
//
// The expanded SQL is sent as Grafana sends it: as text, several
// statements allowed (the simple query protocol).

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend/gtime"
	"github.com/jackc/pgx/v5"
)

// allSelected is the value Grafana keeps for "All".
const allSelected = "$__all"

// variable is a template variable with its current selection.
type variable struct {
	name       string
	multi      bool
	includeAll bool
	allValue   string // the custom all value; empty: every option
	textbox    bool
	query      string   // a query variable's SQL
	options    []string // a query variable's values, for "All"
	selected   []string // the values chosen; {allSelected} for All
}

// panelRange is a dashboard's time range and a panel's interval.
type panelRange struct {
	from, to time.Time
	interval time.Duration
}

var (
	variableSyntax = regexp.MustCompile(`\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}`)
	macroSyntax    = regexp.MustCompile(`\$([_a-zA-Z0-9]+)\(([^\)]*)\)`)
)

// quoteLiteral is the PostgreSQL data source's quoting of one value.
func quoteLiteral(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// format is the SQL data sources' interpolateVariable.
func (v *variable) format(values []string) string {
	if len(values) == 1 && !v.multi && !v.includeAll {
		return strings.ReplaceAll(values[0], "'", "''")
	}
	quoted := make([]string, len(values))
	for i, s := range values {
		quoted[i] = quoteLiteral(s)
	}
	return strings.Join(quoted, ",")
}

// replaceVariables is step 1.
func replaceVariables(sql string, vars map[string]*variable, r panelRange) string {
	scoped := map[string]string{
		"__interval":    gtime.FormatInterval(r.interval),
		"__interval_ms": strconv.FormatInt(r.interval.Milliseconds(), 10),
	}
	return variableSyntax.ReplaceAllStringFunc(sql, func(match string) string {
		m := variableSyntax.FindStringSubmatch(match)
		name := m[1] + m[2] + m[4]
		if s, ok := scoped[name]; ok {
			return s
		}
		v := vars[name]
		if v == nil {
			return match
		}
		if len(v.selected) == 1 && v.selected[0] == allSelected {
			if v.allValue != "" {
				return v.allValue
			}
			return v.format(v.options)
		}
		return v.format(v.selected)
	})
}

// expandMacros is steps 2 and 3.
func expandMacros(sql string, r panelRange) (string, error) {
	from, to := r.from.UTC(), r.to.UTC()
	sql = strings.ReplaceAll(sql, "$__interval_ms", strconv.FormatInt(r.interval.Milliseconds(), 10))
	sql = strings.ReplaceAll(sql, "$__interval", gtime.FormatInterval(r.interval))
	sql = strings.ReplaceAll(sql, "$__unixEpochFrom()", strconv.FormatInt(from.Unix(), 10))
	sql = strings.ReplaceAll(sql, "$__unixEpochTo()", strconv.FormatInt(to.Unix(), 10))
	var failed error
	out := macroSyntax.ReplaceAllStringFunc(sql, func(match string) string {
		m := macroSyntax.FindStringSubmatch(match)
		name, args := m[1], strings.Split(m[2], ",")
		for i := range args {
			args[i] = strings.TrimSpace(args[i])
		}
		group := func() (string, error) {
			if len(args) < 2 {
				return "", fmt.Errorf("macro %s needs a time column and an interval", name)
			}
			d, err := gtime.ParseInterval(strings.Trim(args[1], `'`))
			if err != nil {
				return "", fmt.Errorf("error parsing interval %v", args[1])
			}
			return fmt.Sprintf("floor(extract(epoch from %s)/%v)*%v", args[0], d.Seconds(), d.Seconds()), nil
		}
		var s string
		var err error
		switch name {
		case "__time":
			s = args[0] + ` AS "time"`
		case "__timeEpoch":
			s = fmt.Sprintf(`extract(epoch from %s) as "time"`, args[0])
		case "__timeFilter":
			s = fmt.Sprintf("%s BETWEEN '%s' AND '%s'", args[0], from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
		case "__timeFrom":
			s = "'" + from.Format(time.RFC3339Nano) + "'"
		case "__timeTo":
			s = "'" + to.Format(time.RFC3339Nano) + "'"
		case "__timeGroup":
			s, err = group()
		case "__timeGroupAlias":
			s, err = group()
			s += ` AS "time"`
		default:
			err = fmt.Errorf("unknown macro %q", name)
		}
		if err != nil && failed == nil {
			failed = err
		}
		return s
	})
	return out, failed
}

// interpolate is all three steps.
func interpolate(sql string, vars map[string]*variable, r panelRange) (string, error) {
	return expandMacros(replaceVariables(sql, vars, r), r)
}

// result is what a panel's query returned.
type result struct {
	columns []string
	rows    [][]any
}

// column returns the values of a named column.
func (res *result) column(name string) []any {
	for i, c := range res.columns {
		if c == name {
			out := make([]any, len(res.rows))
			for j, row := range res.rows {
				out[j] = row[i]
			}
			return out
		}
	}
	return nil
}

// runAsGrafana sends expanded SQL as Grafana's PostgreSQL data source does
// (sqleng execQuery: PgConn().Exec, every statement's results) and returns
// the last statement's rows.
func runAsGrafana(ctx context.Context, conn *pgx.Conn, sql string) (*result, error) {
	results, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(results) == 0 {
		return &result{}, nil
	}
	last := results[len(results)-1]
	res := &result{}
	for _, f := range last.FieldDescriptions {
		res.columns = append(res.columns, f.Name)
	}
	m := conn.TypeMap()
	for _, raw := range last.Rows {
		row := make([]any, len(raw))
		for i, b := range raw {
			if b == nil {
				continue
			}
			f := last.FieldDescriptions[i]
			t, ok := m.TypeForOID(f.DataTypeOID)
			if !ok {
				row[i] = string(b)
				continue
			}
			v, err := t.Codec.DecodeValue(m, f.DataTypeOID, f.Format, b)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", f.Name, err)
			}
			row[i] = v
		}
		res.rows = append(res.rows, row)
	}
	return res, nil
}
