module example.com/taskq-receiver

go 1.19
