// SPDX-License-Identifier: Apache-2.0

package configkeys

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/config/configoptional"
)

type inner struct {
	DSN     string        `mapstructure:"dsn"`
	Refresh time.Duration `mapstructure:"model_refresh"`
}

type embedded struct {
	Endpoint string `mapstructure:"endpoint"`
}

type example struct {
	embedded `mapstructure:",squash"`
	Wait     time.Duration                  `mapstructure:"decision_wait"`
	Store    configoptional.Optional[inner] `mapstructure:"store"`
	Names    []string                       `mapstructure:"names"`
	Extra    map[string]any                 `mapstructure:"extra"`
	Nested   struct {
		N int `mapstructure:"n"`
	} `mapstructure:"nested"`
	Skipped int `mapstructure:"-"`
	ID      *struct {
		a, b string `mapstructure:"-"`
	} `mapstructure:"id"`
	private int
}

func TestKeys(t *testing.T) {
	keys, prefixes := Keys(reflect.TypeOf(&example{}))
	assert.ElementsMatch(t, []string{"endpoint", "decision_wait", "store.dsn", "store.model_refresh", "names", "extra", "nested.n", "id"}, keys)
	assert.ElementsMatch(t, []string{"names", "extra"}, prefixes)
	_ = example{}.private
	_ = example{}.ID
}
