// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/errorownership/errorownership/dependencyanalysis"
	"github.com/errorownership/errorownership/ownership"
)

// Settings are a data source's settings. Grafana keeps them as jsonData,
// under the keys of the collector configuration they must match (store.dsn
// and edge_model.* are the errorownership_store extension's dsn and
// edge_model, hints.* the hints extension's), and the password as
// secureJsonData.password:
//
//	{"store": {"dsn": "postgres://grafana@db:5432/errorownership"},
//	 "edge_model": {"half_life": "10m", "min_samples": 20, "confidence": 0.95,
//	                "fail_close_threshold": 0.8, "fail_open_threshold": 0.2},
//	 "hints": {"ttl": "30s", "retry_budget": {"ratio": 0.1, "min_retries_per_second": 10}}}
//
// Keys left out take the collector's defaults.
type Settings struct {
	// DSN is the store's connection string, without a password.
	DSN string
	// Password is the database password (secureJsonData.password); empty
	// leaves it to ~/.pgpass or PGPASSWORD of the Grafana server.
	Password string
	// Model is the edge model's rule and decay, which must be the
	// collector's edge_model for the modes and hints to be the collector's.
	Model dependencyanalysis.ModelConfig
	// HintsTTL and RetryBudget are what the collector's hints announce
	// (hints.ttl, hints.retry_budget).
	HintsTTL    time.Duration
	RetryBudget ownership.RetryBudget
}

// Defaults of the settings that are not the engine's or the hints format's.
const (
	defaultHintsTTL = 30 * time.Second
	minHintsTTL     = time.Second
	minHalfLife     = time.Second
)

// jsonData is the settings as Grafana stores them; nil is "left out".
type jsonData struct {
	Store struct {
		DSN string `json:"dsn"`
	} `json:"store"`
	EdgeModel struct {
		MinSamples         *int     `json:"min_samples"`
		Confidence         *float64 `json:"confidence"`
		FailCloseThreshold *float64 `json:"fail_close_threshold"`
		FailOpenThreshold  *float64 `json:"fail_open_threshold"`
		HalfLife           *string  `json:"half_life"`
	} `json:"edge_model"`
	Hints struct {
		TTL         *string `json:"ttl"`
		RetryBudget struct {
			Ratio               *float64 `json:"ratio"`
			MinRetriesPerSecond *float64 `json:"min_retries_per_second"`
		} `json:"retry_budget"`
	} `json:"hints"`
}

// LoadSettings reads a data source's jsonData and decrypted secureJsonData
// and validates them.
func LoadSettings(raw []byte, secure map[string]string) (Settings, error) {
	s := Settings{
		Password:    secure["password"],
		Model:       dependencyanalysis.DefaultConfig().EdgeModel,
		HintsTTL:    defaultHintsTTL,
		RetryBudget: ownership.DefaultRetryBudget(),
	}
	var j jsonData
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &j); err != nil {
			return s, fmt.Errorf("the data source's settings (jsonData) are not the JSON this plugin reads: %w", err)
		}
	}
	s.DSN = strings.TrimSpace(j.Store.DSN)
	var errs []error
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	if j.EdgeModel.MinSamples != nil {
		s.Model.MinSamples = *j.EdgeModel.MinSamples
	}
	set(&s.Model.Confidence, j.EdgeModel.Confidence)
	set(&s.Model.FailCloseThreshold, j.EdgeModel.FailCloseThreshold)
	set(&s.Model.FailOpenThreshold, j.EdgeModel.FailOpenThreshold)
	set(&s.RetryBudget.Ratio, j.Hints.RetryBudget.Ratio)
	set(&s.RetryBudget.MinRetriesPerSecond, j.Hints.RetryBudget.MinRetriesPerSecond)
	if d, err := duration("edge_model.half_life", j.EdgeModel.HalfLife, "10m"); err != nil {
		errs = append(errs, err)
	} else if d != nil {
		s.Model.HalfLife = *d
	}
	if d, err := duration("hints.ttl", j.Hints.TTL, "30s"); err != nil {
		errs = append(errs, err)
	} else if d != nil {
		s.HintsTTL = *d
	}
	errs = append(errs, s.Validate())
	return s, errors.Join(errs...)
}

// duration parses a duration key written as a string with a unit.
func duration(key string, v *string, example string) (*time.Duration, error) {
	if v == nil {
		return nil, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(*v))
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a duration; write a number with a unit, such as %q", key, *v, example)
	}
	return &d, nil
}

// Validate reports every problem in the settings, each naming its key and
// the fix. Errors never include a password.
func (s *Settings) Validate() error {
	var errs []error
	switch {
	case s.DSN == "":
		errs = append(errs, errors.New("store.dsn is empty: give the store's connection string, such as postgres://grafana@db.internal:5432/errorownership"))
	case dsnHasPassword(s.DSN):
		errs = append(errs, errors.New("store.dsn holds a password, which Grafana keeps in clear text: remove it from the connection string and give it in the password field (secureJsonData.password)"))
	default:
		if _, err := pgconn.ParseConfig(s.DSN); err != nil {
			errs = append(errs, errors.New("store.dsn cannot be parsed; use postgres://user@host:5432/dbname or host=... dbname=... user=... pairs"))
		}
	}
	engine := dependencyanalysis.Config{EdgeModel: s.Model}
	errs = append(errs, engine.Validate())
	if hl := s.Model.HalfLife; hl > 0 && hl < minHalfLife {
		errs = append(errs, fmt.Errorf("edge_model.half_life: %v must be 0 (observations never fade) or at least %v, such as 10m, as in the collector", hl, minHalfLife))
	}
	if s.HintsTTL < minHintsTTL {
		errs = append(errs, fmt.Errorf("hints.ttl: %v must be at least %v, such as 30s, as in the collector", s.HintsTTL, minHintsTTL))
	}
	if err := s.RetryBudget.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("hints.retry_budget: %w", err))
	}
	return errors.Join(errs...)
}

// dsnKeyPassword finds a password in keyword/value pairs.
var dsnKeyPassword = regexp.MustCompile(`(^|\s)password\s*=`)

// dsnHasPassword reports whether a connection string itself carries a
// password: in URL user information, a password query parameter, or a
// password keyword.
func dsnHasPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, ok := u.User.Password(); ok {
			return true
		}
		return u.Query().Has("password")
	}
	return dsnKeyPassword.MatchString(dsn)
}
