// SPDX-License-Identifier: Apache-2.0

// Command gendashboards writes the errorownership Grafana dashboards as
// JSON, one file each, into a directory (make dashboards: dashboards/json),
// and the Prometheus rules into another (dashboards/rules).
//
//	go run ./dashboards/cmd/gendashboards [-out DIR] [-rules DIR]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/errorownership/errorownership/dashboards"
)

func main() {
	out := flag.String("out", "dashboards/json", "directory to write the dashboards into")
	rules := flag.String("rules", "dashboards/rules", "directory to write the Prometheus rules into")
	flag.Parse()
	err := dashboards.Write(*out)
	if err == nil {
		err = dashboards.WriteRules(*rules)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendashboards:", err)
		os.Exit(1)
	}
}
