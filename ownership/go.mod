module github.com/errorownership/errorownership/ownership

go 1.24.0
