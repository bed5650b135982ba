<?php

namespace App\Http\Middleware;

use Illuminate\Cookie\Middleware\EncryptCookies as Middleware;

class EncryptCookies extends Middleware
{
    /** PHP's own session cookie (the /native routes) is not Laravel's to decrypt. */
    protected $except = ['PHPSESSID'];
}
