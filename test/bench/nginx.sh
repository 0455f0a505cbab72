# Sourced by the bench scripts: nginx as a plain streaming reverse proxy (issue 8's baseline).
#
#   nginx_conf DIR UPSTREAM PORT [WORKERS]   writes DIR/nginx.conf: WORKERS (1) worker processes
#     in front of UPSTREAM (HOST:PORT) on 127.0.0.1:PORT, proxy_buffering off, upstream keep-alive;
#     LISTEN_OPTS (e.g. "reuseport": a listening socket per worker) go on the listen line.
#   free_port                                 prints a free TCP port on 127.0.0.1 (nginx cannot
#     listen on port 0 and report it).

nginx_conf() {
  local dir=$1 upstream=$2 port=$3 workers=${4:-1} fds
  fds=$(ulimit -Hn)
  mkdir -p "$dir/logs"
  cat > "$dir/nginx.conf" <<CONF
worker_processes $workers;
worker_rlimit_nofile $fds;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections $fds; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  upstream sim { server $upstream; keepalive 1024; }
  server {
    listen 127.0.0.1:$port${LISTEN_OPTS:+ $LISTEN_OPTS};
    location / {
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
CONF
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
