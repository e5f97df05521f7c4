// SPDX-License-Identifier: Apache-2.0

// Command gendashboards writes the errorownership Grafana dashboards as
// JSON, one file each, into a directory (make dashboards: dashboards/json).
//
//	go run ./dashboards/cmd/gendashboards [-out DIR]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/errorownership/errorownership/dashboards"
)

func main() {
	out := flag.String("out", "dashboards/json", "directory to write the dashboards into")
	flag.Parse()
	if err := dashboards.Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gendashboards:", err)
		os.Exit(1)
	}
}
