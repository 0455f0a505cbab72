#pragma once
// Namespace aliases and the Boost headers every networking file needs.  Beast and Asio are
// compiled once (net/beast_impl.cpp); this header only declares.
#include <utility>  // must precede asio: Boost 1.74's awaitable.hpp uses std::exchange unqualified

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>

namespace tokentap {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using clock = std::chrono::steady_clock;

// Everything on a worker runs on that worker's io_context, so sessions name its executor type
// directly instead of the type-erased `any_io_executor` Asio defaults to: the callgrind profile
// spent ~10 % of the proxy's instructions constructing, copying and querying `any_io_executor`s
// (every co_await and every I/O operation's work tracking).  Use these types on the data path.
using io_executor = asio::io_context::executor_type;
template <class T>
using awaitable = asio::awaitable<T, io_executor>;
using tcp_socket = tcp::socket::rebind_executor<io_executor>::other;
using tcp_resolver = tcp::resolver::rebind_executor<io_executor>::other;
using steady_timer = asio::steady_timer::rebind_executor<io_executor>::other;
using tcp_stream = beast::basic_stream<tcp, io_executor>;

/// Completion token for coroutines that reports errors through `ec` instead of throwing:
/// nothing on the data path throws.
inline auto use_ec(error_code& ec) {
  return asio::redirect_error(asio::use_awaitable_t<io_executor>{}, ec);
}

}  // namespace tokentap

namespace tokentap::net {

/// Completion handler for co_spawn'ed sessions: logs an exception that escaped (a bug: the data
/// path reports errors through error_code), never rethrows into the io_context.
void log_escaped_exception(std::exception_ptr e, const char* what) noexcept;

}  // namespace tokentap::net
